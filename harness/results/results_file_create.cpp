// Creating a results file: the whole grid laid out at once (axes as dimension scales with
// their auxiliary coordinates, the extra dimensions, every column at its fill value), then the
// root attributes and counters.
#include "harness/results/results_file.hpp"

#include <hdf5_hl.h>

#include <algorithm>
#include <limits>
#include <map>
#include <stdexcept>

#include "harness/results/results_file_h5.hpp"

namespace fp8lab {
using namespace results_detail;
namespace {

const char* type_name(ColumnDef::Type t) {
  return t == ColumnDef::Type::f64 ? "f64" : t == ColumnDef::Type::i64 ? "i64" : "str";
}

const char* storage_name(AxisStorage s) {
  switch (s) {
    case AxisStorage::integer: return "integer";
    case AxisStorage::promotion: return "promotion";
    case AxisStorage::granularity: return "granularity";
    default: return "string";
  }
}

std::int64_t axis_number(const GridAxis& axis, const std::string& value) {
  if (axis.storage == AxisStorage::promotion && value == "never") return kNeverPromotion;
  std::size_t used = 0;
  std::int64_t n = 0;
  try {
    n = std::stoll(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != value.size())
    throw std::invalid_argument("axis '" + axis.name + "': value '" + value + "' is not an integer");
  if (axis.storage == AxisStorage::promotion && n == kNeverPromotion)
    throw std::invalid_argument("axis 'promotion': 0 is the stored sentinel of \"never\", not an interval");
  return n;
}

h5::Dataset create_1d(hid_t file, const std::string& name, hid_t file_type, hsize_t size) {
  const h5::Dataspace space(H5Screate_simple(1, &size, nullptr), "H5Screate_simple");
  return h5::Dataset(H5Dcreate2(file, name.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                     ("H5Dcreate2 " + name).c_str());
}

void write_strings(hid_t dataset, const std::vector<std::string>& values) {
  std::vector<const char*> text;
  for (const std::string& v : values) text.push_back(v.c_str());
  const h5::Datatype type = string_type();
  h5::check(H5Dwrite(dataset, type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data()), "H5Dwrite");
}

}  // namespace

ResultsFile ResultsFile::create(const std::filesystem::path& file, const std::vector<GridAxis>& axes,
                                const std::vector<ColumnDef>& columns, const std::map<std::string, std::string>& attributes,
                                const std::map<std::string, std::int64_t>& counters) try {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors become exceptions with our messages, not stack dumps
  if (axes.empty()) throw std::logic_error("a results grid needs at least one axis");
  for (const GridAxis& axis : axes)  // every value checked before the file exists
    if (numeric_axis(axis.storage))
      for (const std::string& v : axis.values) axis_number(axis, v);
  ResultsFile r;
  r.path_ = file;
  r.axes_ = axes;
  r.columns_ = columns;
  // Track link creation order so readers list variables as defined (axes, then metrics).
  const h5::PropertyList create(H5Pcreate(H5P_FILE_CREATE), "H5Pcreate");
  h5::check(H5Pset_link_creation_order(create.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED),
            "H5Pset_link_creation_order");
  r.file_ = h5::File(H5Fcreate(file.c_str(), H5F_ACC_EXCL, create.get(), H5P_DEFAULT),
                     ("H5Fcreate " + file.string()).c_str());
  const h5::Datatype strings = string_type();
  const hid_t root = r.file_.get();

  // Axes: coordinate variables and dimension scales.
  std::vector<h5::Dataset> scales;
  std::string auxiliary_names;
  for (const GridAxis& axis : axes) {
    if (axis.values.empty()) throw std::logic_error("axis '" + axis.name + "' has no values");
    const hsize_t n = axis.values.size();
    h5::Dataset d;
    if (numeric_axis(axis.storage)) {
      std::vector<std::int64_t> numbers;
      for (const std::string& v : axis.values) numbers.push_back(axis_number(axis, v));
      d = create_1d(root, axis.name, H5T_STD_I64LE, n);
      h5::check(H5Dwrite(d.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, numbers.data()), "H5Dwrite");
      write_string_attribute(d.get(), "units", "1");
    } else {
      d = create_1d(root, axis.name, strings.get(), n);
      write_strings(d.get(), axis.values);
    }
    h5::check(H5DSset_scale(d.get(), axis.name.c_str()), "H5DSset_scale");
    write_string_attribute(d.get(), "long_name", axis.long_name);
    write_string_attribute(d.get(), kAxisAttribute, storage_name(axis.storage));
    if (axis.storage == AxisStorage::promotion) {
      write_i64_attribute(d.get(), "flag_values", kNeverPromotion);
      write_string_attribute(d.get(), "flag_meanings", "never");
      write_string_attribute(d.get(), "comment",
                             "promotion interval N_C in elements of K; 0 stands for \"never\" (no promotion: the "
                             "whole K accumulates in the tensor-core accumulator)");
    }
    for (const AuxiliaryCoordinate& aux : axis.auxiliary) {
      if (aux.values.size() != axis.values.size()) throw std::logic_error("coordinate '" + aux.name + "' has the wrong length");
      h5::Dataset a = create_1d(root, aux.name, H5T_STD_I64LE, n);
      h5::check(H5Dwrite(a.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, aux.values.data()), "H5Dwrite");
      h5::check(H5DSattach_scale(a.get(), d.get(), 0), "H5DSattach_scale");
      write_string_attribute(a.get(), "long_name", aux.long_name);
      write_string_attribute(a.get(), "units", aux.units);
      write_string_attribute(a.get(), kAuxiliaryAttribute, axis.name);
      write_string_attribute(a.get(), "comment", aux.comment);
      if (std::find(aux.values.begin(), aux.values.end(), kMissingInteger) != aux.values.end())
        write_number_attribute(a.get(), "_FillValue", H5T_STD_I64LE, H5T_NATIVE_INT64, &kMissingInteger);
      auxiliary_names += (auxiliary_names.empty() ? "" : " ") + aux.name;
    }
    scales.push_back(std::move(d));
  }

  // Extra trailing dimensions, one scale per distinct name.
  std::map<std::string, h5::Dataset> extra_scales;
  for (const ColumnDef& c : columns) {
    if (!c.extra) continue;
    const ExtraDimension& e = *c.extra;
    if (c.type != ColumnDef::Type::f64) throw std::logic_error("column '" + c.name + "': an extra dimension needs f64");
    if (e.size() == 0 || (!e.numbers.empty() && !e.labels.empty()))
      throw std::logic_error("column '" + c.name + "': extra dimension '" + e.name + "' needs numbers or labels");
    if (extra_scales.contains(e.name)) continue;
    h5::Dataset d;
    if (!e.numbers.empty()) {
      d = create_1d(root, e.name, H5T_STD_I64LE, e.numbers.size());
      h5::check(H5Dwrite(d.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, e.numbers.data()), "H5Dwrite");
      write_string_attribute(d.get(), "units", e.units);
    } else {
      d = create_1d(root, e.name, strings.get(), e.labels.size());
      write_strings(d.get(), e.labels);
    }
    h5::check(H5DSset_scale(d.get(), e.name.c_str()), "H5DSset_scale");
    write_string_attribute(d.get(), "long_name", e.long_name);
    extra_scales.emplace(e.name, std::move(d));
  }

  // Columns: N-D over the axes (and the extra dimension), every element at its fill value.
  std::vector<hsize_t> grid;
  for (const GridAxis& axis : axes) grid.push_back(axis.values.size());
  for (const ColumnDef& c : columns) {
    std::vector<hsize_t> dims = grid;
    if (c.extra) dims.push_back(c.extra->size());
    const h5::Dataspace space(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), "H5Screate_simple");
    const h5::PropertyList properties(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate");
    // Allocated and filled now: a point not yet run reads as its fill value, in any reader.
    h5::check(H5Pset_alloc_time(properties.get(), H5D_ALLOC_TIME_EARLY), "H5Pset_alloc_time");
    h5::check(H5Pset_fill_time(properties.get(), H5D_FILL_TIME_ALLOC), "H5Pset_fill_time");
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const std::int64_t missing = kMissingInteger;
    hid_t file_type = strings.get();
    if (c.type == ColumnDef::Type::f64) {
      file_type = H5T_IEEE_F64LE;
      h5::check(H5Pset_fill_value(properties.get(), H5T_NATIVE_DOUBLE, &nan), "H5Pset_fill_value");
    } else if (c.type == ColumnDef::Type::i64) {
      file_type = H5T_STD_I64LE;
      h5::check(H5Pset_fill_value(properties.get(), H5T_NATIVE_INT64, &missing), "H5Pset_fill_value");
    }
    h5::Dataset d(H5Dcreate2(root, c.name.c_str(), file_type, space.get(), H5P_DEFAULT, properties.get(), H5P_DEFAULT),
                  ("H5Dcreate2 " + c.name).c_str());
    for (unsigned i = 0; i < scales.size(); ++i) h5::check(H5DSattach_scale(d.get(), scales[i].get(), i), "H5DSattach_scale");
    if (c.extra)
      h5::check(H5DSattach_scale(d.get(), extra_scales.at(c.extra->name).get(), static_cast<unsigned>(scales.size())),
                "H5DSattach_scale");
    write_string_attribute(d.get(), "long_name", c.long_name);
    write_string_attribute(d.get(), kTypeAttribute, type_name(c.type));
    if (c.type == ColumnDef::Type::f64) {
      write_string_attribute(d.get(), "units", c.units);
      write_number_attribute(d.get(), "_FillValue", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &nan);
    } else if (c.type == ColumnDef::Type::i64) {
      write_string_attribute(d.get(), "units", c.units);
      write_number_attribute(d.get(), "_FillValue", H5T_STD_I64LE, H5T_NATIVE_INT64, &missing);
      write_string_attribute(d.get(), "comment", "-9223372036854775808 (INT64_MIN, the _FillValue): not computed");
    }
    if (!auxiliary_names.empty()) write_string_attribute(d.get(), "coordinates", auxiliary_names);
    r.datasets_.emplace(c.name, std::move(d));
  }
  for (const auto& [name, value] : attributes) write_string_attribute(root, name, value);
  for (const auto& [name, value] : counters) write_i64_attribute(root, name, value);
  r.flush();
  return r;
} catch (const h5::H5Error& e) {
  rethrow_naming(file, e);
}

}  // namespace fp8lab
