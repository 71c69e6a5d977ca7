// fp8lab._core._write_grid: a grid results file (harness/results/results_file.hpp: axes as dimension
// scales, every column over all of them, units and long names, provenance) written whole from
// Python, for writers that have their grid in hand rather than a study spec: fp8lab.torch's
// Recorder. The file is written beside its destination and renamed over it, so a reader never
// sees a half-written one; every point's status is "ok".
#include <pybind11/stl.h>

#include <filesystem>

#include "harness/runtime/build_info.hpp"
#include "harness/python/bindings.hpp"
#include "harness/results/results_file.hpp"

namespace fp8lab::python {
namespace py = pybind11;

namespace {

void write_grid(const std::string& path, const std::vector<std::tuple<std::string, std::string, std::string, std::vector<std::string>>>& axes,
                const std::vector<std::tuple<std::string, std::string, std::string>>& columns,
                const std::map<std::string, std::vector<double>>& data, const std::map<std::string, std::string>& attributes) {
  std::vector<GridAxis> grid;
  std::size_t points = 1;
  for (const auto& [name, long_name, storage, values] : axes) {
    if (storage != "integer" && storage != "string")
      throw std::invalid_argument("axis " + name + ": storage '" + storage + "' is not integer or string");
    grid.push_back({name, long_name, storage == "integer" ? AxisStorage::integer : AxisStorage::string, values, {}});
    points *= values.size();
  }
  std::vector<ColumnDef> defs = {
      {"status", ColumnDef::Type::str, "", "ok (every point of a recorder's file is measured)"},
      {"reason", ColumnDef::Type::str, "", "empty"}};
  for (const auto& [name, units, long_name] : columns) {
    if (!data.contains(name)) throw std::invalid_argument("column " + name + " has no data");
    defs.push_back({name, ColumnDef::Type::f64, units, long_name});
  }
  std::map<std::string, std::string> root = build_provenance();
  for (const auto& [name, value] : attributes) root[name] = value;
  const std::filesystem::path out(path), partial(path + ".partial");
  std::filesystem::remove(partial);
  {
    ResultsFile file = ResultsFile::create(partial, grid, defs, root,
                                           {{"points_total", static_cast<std::int64_t>(points)},
                                            {"points_done", static_cast<std::int64_t>(points)}});
    for (const auto& [name, units, long_name] : columns) file.write_column(name, data.at(name));
    file.write_column("reason", std::vector<std::string>(points));
    file.write_column("status", std::vector<std::string>(points, "ok"));
    file.close();
  }
  std::filesystem::rename(partial, out);
}

}  // namespace

void add_grid_file_binding(py::module_& m) {
  m.def("_write_grid", &write_grid, py::arg("path"), py::arg("axes"), py::arg("columns"), py::arg("data"),
        py::arg("attributes"),
        "Writes a grid results file whole: axes [(name, long_name, 'integer'|'string', values)], f64 columns "
        "[(name, units, long_name)] with data {name: values in grid order, last axis fastest}, root attributes");
}

}  // namespace fp8lab::python
