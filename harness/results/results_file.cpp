// A results file's grid points: one point's element of every column written (status last)
// and read back, whole columns read, root attributes and counters; closing and flushing.
#include "harness/results/results_file.hpp"

#include <algorithm>
#include <stdexcept>

#include "harness/results/results_file_h5.hpp"

namespace fp8lab {
using namespace results_detail;

void ResultsFile::close() {
  datasets_.clear();
  file_.reset();
}

void ResultsFile::flush() { h5::check(H5Fflush(file_.get(), H5F_SCOPE_GLOBAL), "H5Fflush"); }

std::int64_t ResultsFile::points() const {
  std::int64_t n = 1;
  for (const GridAxis& a : axes_) n *= static_cast<std::int64_t>(a.values.size());
  return n;
}

std::vector<std::string> ResultsFile::point_values(std::int64_t index) const {
  std::vector<std::string> values(axes_.size());
  for (std::size_t a = axes_.size(); a-- > 0;) {
    const auto n = static_cast<std::int64_t>(axes_[a].values.size());
    values[a] = axes_[a].values[static_cast<std::size_t>(index % n)];
    index /= n;
  }
  return values;
}

hid_t ResultsFile::dataset(const std::string& name) const {
  const auto it = datasets_.find(name);
  if (it == datasets_.end()) throw h5::H5Error(path_.string() + ": no column '" + name + "'");
  return it->second.get();
}

ResultsFile::PointSelection ResultsFile::select_point(std::int64_t index, const ColumnDef& c) const {
  // The grid index in the kind's axis order, the last axis fastest.
  std::vector<hsize_t> start(axes_.size()), count(axes_.size(), 1);
  for (std::size_t a = axes_.size(); a-- > 0;) {
    const auto n = static_cast<std::int64_t>(axes_[a].values.size());
    start[a] = static_cast<hsize_t>(index % n);
    index /= n;
  }
  if (c.extra) {
    start.push_back(0);
    count.push_back(c.extra->size());
  }
  h5::Dataspace file_space(H5Dget_space(dataset(c.name)), "H5Dget_space");
  h5::check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr),
            "H5Sselect_hyperslab");
  h5::Dataspace memory(H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr), "H5Screate_simple");
  return {std::move(file_space), std::move(memory)};
}

void ResultsFile::write_column(const std::string& column, const std::vector<double>& values) try {
  const auto c = std::find_if(columns_.begin(), columns_.end(), [&](const ColumnDef& d) { return d.name == column; });
  const auto size = static_cast<std::size_t>(points()) * (c != columns_.end() && c->extra ? c->extra->size() : 1);
  if (c == columns_.end() || c->type != ColumnDef::Type::f64 || values.size() != size)
    throw std::invalid_argument("results column '" + column + "': not an f64 column of " + std::to_string(size) + " values");
  h5::check(H5Dwrite(dataset(column), H5T_NATIVE_DOUBLE, H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), "H5Dwrite");
  flush();
} catch (const h5::H5Error& e) {
  rethrow_naming(path_, e);
}

void ResultsFile::write_column(const std::string& column, const std::vector<std::string>& values) try {
  const auto c = std::find_if(columns_.begin(), columns_.end(), [&](const ColumnDef& d) { return d.name == column; });
  if (c == columns_.end() || c->type != ColumnDef::Type::str || values.size() != static_cast<std::size_t>(points()))
    throw std::invalid_argument("results column '" + column + "': not a string column of " + std::to_string(points()) +
                                " values");
  std::vector<const char*> texts;
  for (const std::string& v : values) texts.push_back(v.c_str());
  h5::check(H5Dwrite(dataset(column), string_type().get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, texts.data()), "H5Dwrite");
  flush();
} catch (const h5::H5Error& e) {
  rethrow_naming(path_, e);
}

void ResultsFile::write_point(std::int64_t index, const Row& row, const std::map<std::string, std::int64_t>& counters) try {
  if (index < 0 || index >= points()) throw std::logic_error("grid point " + std::to_string(index) + " is outside the grid");
  // Check the whole row first so a bad row never leaves a point half written.
  for (const ColumnDef& c : columns_) {
    const auto it = row.find(c.name);
    if (it == row.end()) throw std::invalid_argument("results row lacks column '" + c.name + "'");
    const Value& v = it->second;
    const bool ok = c.extra ? std::holds_alternative<std::vector<double>>(v) &&
                                  std::get<std::vector<double>>(v).size() == c.extra->size()
                            : (c.type == ColumnDef::Type::f64 && std::holds_alternative<double>(v)) ||
                                  (c.type == ColumnDef::Type::i64 && std::holds_alternative<std::int64_t>(v)) ||
                                  (c.type == ColumnDef::Type::str && std::holds_alternative<std::string>(v));
    if (!ok) throw std::invalid_argument("results row: column '" + c.name + "' has the wrong type or length");
  }
  const h5::Datatype strings = string_type();
  const auto write = [&](const ColumnDef& c) {
    const hid_t d = dataset(c.name);
    const auto [file_space, memory] = select_point(index, c);
    const Value& v = row.at(c.name);
    if (c.extra) {
      h5::check(H5Dwrite(d, H5T_NATIVE_DOUBLE, memory.get(), file_space.get(), H5P_DEFAULT,
                         std::get<std::vector<double>>(v).data()), "H5Dwrite");
    } else if (c.type == ColumnDef::Type::str) {
      const char* text = std::get<std::string>(v).c_str();
      h5::check(H5Dwrite(d, strings.get(), memory.get(), file_space.get(), H5P_DEFAULT, &text), "H5Dwrite");
    } else if (c.type == ColumnDef::Type::f64) {
      h5::check(H5Dwrite(d, H5T_NATIVE_DOUBLE, memory.get(), file_space.get(), H5P_DEFAULT, &std::get<double>(v)), "H5Dwrite");
    } else {
      h5::check(H5Dwrite(d, H5T_NATIVE_INT64, memory.get(), file_space.get(), H5P_DEFAULT, &std::get<std::int64_t>(v)),
                "H5Dwrite");
    }
  };
  // `status` last: a point counts as done (and is skipped by --resume) once all of it is written.
  for (const ColumnDef& c : columns_)
    if (c.name != kStatusColumn) write(c);
  for (const ColumnDef& c : columns_)
    if (c.name == kStatusColumn) write(c);
  for (const auto& [name, value] : counters) write_i64_attribute(file_.get(), name, value);
  flush();
} catch (const h5::H5Error& e) {
  rethrow_naming(path_, e);
}

std::vector<double> ResultsFile::read_f64(const std::string& column) const try {
  return read_all_numbers<double>(dataset(column), H5T_NATIVE_DOUBLE);
} catch (const h5::H5Error& e) {
  rethrow_naming(path_, e);
}

std::vector<std::int64_t> ResultsFile::read_i64(const std::string& column) const try {
  return read_all_numbers<std::int64_t>(dataset(column), H5T_NATIVE_INT64);
} catch (const h5::H5Error& e) {
  rethrow_naming(path_, e);
}

std::vector<std::string> ResultsFile::read_str(const std::string& column) const try {
  return read_all_strings(dataset(column));
} catch (const h5::H5Error& e) {
  rethrow_naming(path_, e);
}

Row ResultsFile::read_point(std::int64_t index) const try {
  Row row;
  const h5::Datatype strings = string_type();
  for (const ColumnDef& c : columns_) {
    const hid_t d = dataset(c.name);
    const auto [file_space, memory] = select_point(index, c);
    if (c.extra) {
      std::vector<double> v(c.extra->size());
      h5::check(H5Dread(d, H5T_NATIVE_DOUBLE, memory.get(), file_space.get(), H5P_DEFAULT, v.data()), "H5Dread");
      row[c.name] = std::move(v);
    } else if (c.type == ColumnDef::Type::str) {
      char* text = nullptr;
      h5::check(H5Dread(d, strings.get(), memory.get(), file_space.get(), H5P_DEFAULT, &text), "H5Dread");
      row[c.name] = std::string(text ? text : "");
      H5free_memory(text);
    } else if (c.type == ColumnDef::Type::f64) {
      double v = 0;
      h5::check(H5Dread(d, H5T_NATIVE_DOUBLE, memory.get(), file_space.get(), H5P_DEFAULT, &v), "H5Dread");
      row[c.name] = v;
    } else {
      std::int64_t v = 0;
      h5::check(H5Dread(d, H5T_NATIVE_INT64, memory.get(), file_space.get(), H5P_DEFAULT, &v), "H5Dread");
      row[c.name] = v;
    }
  }
  return row;
} catch (const h5::H5Error& e) {
  rethrow_naming(path_, e);
}

std::string ResultsFile::root_attribute(const std::string& name) const try {
  return read_string_attribute(file_.get(), name);
} catch (const h5::H5Error& e) {
  rethrow_naming(path_, e);
}

std::optional<std::int64_t> ResultsFile::root_counter(const std::string& name) const try {
  return read_i64_attribute(file_.get(), name);
} catch (const h5::H5Error& e) {
  rethrow_naming(path_, e);
}

void ResultsFile::set_root_attribute(const std::string& name, const std::string& value) try {
  write_string_attribute(file_.get(), name, value);
  flush();
} catch (const h5::H5Error& e) {
  rethrow_naming(path_, e);
}

void ResultsFile::set_root_counter(const std::string& name, std::int64_t value) try {
  write_i64_attribute(file_.get(), name, value);
  flush();
} catch (const h5::H5Error& e) {
  rethrow_naming(path_, e);
}

}  // namespace fp8lab
