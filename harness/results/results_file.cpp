#include "harness/results/results_file.hpp"

#include <hdf5_hl.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <set>
#include <stdexcept>

namespace fp8lab {
namespace {

// Marks fp8lab writes on each variable, so a file is read back without guessing.
constexpr const char* kTypeAttribute = "fp8lab_type";           // on columns: f64, i64, str
constexpr const char* kAxisAttribute = "fp8lab_axis";           // on axes: how values are stored
constexpr const char* kAuxiliaryAttribute = "fp8lab_auxiliary_of";  // on tile-size coordinates: the axis
constexpr const char* kStatusColumn = "status";

h5::Datatype string_type() {
  h5::Datatype t(H5Tcopy(H5T_C_S1), "H5Tcopy");
  h5::check(H5Tset_size(t.get(), H5T_VARIABLE), "H5Tset_size");
  h5::check(H5Tset_cset(t.get(), H5T_CSET_UTF8), "H5Tset_cset");
  return t;
}

void write_string_attribute(hid_t object, const std::string& name, const std::string& value) {
  const h5::Datatype type = string_type();
  const h5::Dataspace space(H5Screate(H5S_SCALAR), "H5Screate");
  if (H5Aexists(object, name.c_str()) > 0) h5::check(H5Adelete(object, name.c_str()), "H5Adelete");
  const h5::Attribute attribute(H5Acreate2(object, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT),
                                "H5Acreate2");
  const char* text = value.c_str();
  h5::check(H5Awrite(attribute.get(), type.get(), &text), "H5Awrite");
}

// A scalar number attribute of the given file type; rewritten in place when it exists (the
// points_done counter changes after every point: no attribute churn in the object header).
void write_number_attribute(hid_t object, const std::string& name, hid_t file_type, hid_t memory_type, const void* value) {
  if (H5Aexists(object, name.c_str()) <= 0) {
    const h5::Dataspace space(H5Screate(H5S_SCALAR), "H5Screate");
    const h5::Attribute created(H5Acreate2(object, name.c_str(), file_type, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                                "H5Acreate2");
    h5::check(H5Awrite(created.get(), memory_type, value), "H5Awrite");
    return;
  }
  const h5::Attribute attribute(H5Aopen(object, name.c_str(), H5P_DEFAULT), "H5Aopen");
  h5::check(H5Awrite(attribute.get(), memory_type, value), "H5Awrite");
}

void write_i64_attribute(hid_t object, const std::string& name, std::int64_t value) {
  write_number_attribute(object, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &value);
}

H5T_class_t attribute_class(hid_t object, const std::string& name) {
  const h5::Attribute attribute(H5Aopen(object, name.c_str(), H5P_DEFAULT), "H5Aopen");
  const h5::Datatype type(H5Aget_type(attribute.get()), "H5Aget_type");
  return H5Tget_class(type.get());
}

std::string read_string_attribute(hid_t object, const std::string& name) {
  if (H5Aexists(object, name.c_str()) <= 0 || attribute_class(object, name) != H5T_STRING) return "";
  const h5::Attribute attribute(H5Aopen(object, name.c_str(), H5P_DEFAULT), "H5Aopen");
  const h5::Datatype file_type(H5Aget_type(attribute.get()), "H5Aget_type");
  if (H5Tis_variable_str(file_type.get()) <= 0) {  // fixed-length (files edited by other tools)
    std::string value(H5Tget_size(file_type.get()), '\0');
    h5::check(H5Aread(attribute.get(), file_type.get(), value.data()), "H5Aread");
    return value.substr(0, value.find('\0'));
  }
  const h5::Datatype type = string_type();
  char* text = nullptr;
  h5::check(H5Aread(attribute.get(), type.get(), &text), "H5Aread");
  std::string value = text ? text : "";
  H5free_memory(text);
  return value;
}

std::optional<std::int64_t> read_i64_attribute(hid_t object, const std::string& name) {
  if (H5Aexists(object, name.c_str()) <= 0 || attribute_class(object, name) != H5T_INTEGER) return std::nullopt;
  const h5::Attribute attribute(H5Aopen(object, name.c_str(), H5P_DEFAULT), "H5Aopen");
  std::int64_t value = 0;
  h5::check(H5Aread(attribute.get(), H5T_NATIVE_INT64, &value), "H5Aread");
  return value;
}

// An HDF5 failure past the first checks (a write to a full disk, a damaged dataset) names the
// file, as every other error does; messages that already start with it are kept as they are.
[[noreturn]] void rethrow_naming(const std::filesystem::path& file, const h5::H5Error& e) {
  const std::string what = e.what();
  if (what.starts_with(file.string())) throw e;
  throw h5::H5Error(file.string() + ": " + what);
}

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

AxisStorage parse_storage(const std::string& s) {
  return s == "integer" ? AxisStorage::integer
         : s == "promotion" ? AxisStorage::promotion
         : s == "granularity" ? AxisStorage::granularity
                              : AxisStorage::string;
}

bool numeric_axis(AxisStorage s) { return s == AxisStorage::integer || s == AxisStorage::promotion; }

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

// The whole of a dataset, in C order.
std::vector<std::string> read_all_strings(hid_t dataset) {
  const h5::Dataspace space(H5Dget_space(dataset), "H5Dget_space");
  const hssize_t count = H5Sget_simple_extent_npoints(space.get());
  std::vector<char*> raw(static_cast<std::size_t>(std::max<hssize_t>(count, 0)), nullptr);
  const h5::Datatype type = string_type();
  h5::check(H5Dread(dataset, type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, raw.data()), "H5Dread");
  std::vector<std::string> out;
  for (char* s : raw) out.emplace_back(s ? s : "");
  h5::check(H5Dvlen_reclaim(type.get(), space.get(), H5P_DEFAULT, raw.data()), "H5Dvlen_reclaim");
  return out;
}

template <class T>
std::vector<T> read_all_numbers(hid_t dataset, hid_t memory_type) {
  const h5::Dataspace space(H5Dget_space(dataset), "H5Dget_space");
  std::vector<T> out(static_cast<std::size_t>(std::max<hssize_t>(H5Sget_simple_extent_npoints(space.get()), 0)));
  if (!out.empty()) h5::check(H5Dread(dataset, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), "H5Dread");
  return out;
}

std::vector<hsize_t> dataset_dims(hid_t dataset) {
  const h5::Dataspace space(H5Dget_space(dataset), "H5Dget_space");
  const int rank = H5Sget_simple_extent_ndims(space.get());
  std::vector<hsize_t> dims(static_cast<std::size_t>(std::max(rank, 0)));
  if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
  return dims;
}

// The name (without '/') of the dimension scale attached to dimension `index` of `dataset`.
std::string scale_name(hid_t dataset, unsigned index) {
  std::string name;
  const auto visit = [](hid_t, unsigned, hid_t scale, void* out) -> herr_t {
    char path[512] = "";
    H5Iget_name(scale, path, sizeof path);
    *static_cast<std::string*>(out) = path[0] == '/' ? path + 1 : path;
    return 1;  // the first scale is the dimension's
  };
  int at = 0;
  if (H5DSget_num_scales(dataset, index) > 0) H5DSiterate_scales(dataset, index, &at, visit, &name);
  return name;
}

}  // namespace

std::string hdf5_library_version() {
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
}

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

ResultsFile ResultsFile::open(const std::filesystem::path& file, bool writable) try {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  if (!std::filesystem::exists(file)) throw h5::H5Error(file.string() + ": no such results file");
  if (H5Fis_hdf5(file.c_str()) <= 0) throw h5::H5Error(file.string() + ": not an HDF5 file");
  ResultsFile r;
  r.path_ = file;
  r.file_ = h5::File(H5Fopen(file.c_str(), writable ? H5F_ACC_RDWR : H5F_ACC_RDONLY, H5P_DEFAULT),
                     ("H5Fopen " + file.string()).c_str());
  const hid_t root = r.file_.get();
  const auto not_ours = [&](const std::string& why) {
    return h5::H5Error(file.string() + ": not an fp8lab results file (" + why + ")");
  };
  if (H5Lexists(root, kStatusColumn, H5P_DEFAULT) <= 0) throw not_ours("no 'status' column");
  // The axes, in order: the dimension scales of `status`.
  std::vector<hsize_t> grid;
  {
    const h5::Dataset status(H5Dopen2(root, kStatusColumn, H5P_DEFAULT), "H5Dopen2 status");
    grid = dataset_dims(status.get());
    for (unsigned i = 0; i < grid.size(); ++i) {
      const std::string name = scale_name(status.get(), i);
      if (name.empty()) throw not_ours("dimension " + std::to_string(i) + " of 'status' has no axis");
      const h5::Dataset d(H5Dopen2(root, name.c_str(), H5P_DEFAULT), ("H5Dopen2 " + name).c_str());
      GridAxis axis{name, read_string_attribute(d.get(), "long_name"),
                    parse_storage(read_string_attribute(d.get(), kAxisAttribute)), {}, {}};
      if (numeric_axis(axis.storage)) {
        for (std::int64_t v : read_all_numbers<std::int64_t>(d.get(), H5T_NATIVE_INT64))
          axis.values.push_back(axis.storage == AxisStorage::promotion && v == kNeverPromotion ? "never" : std::to_string(v));
      } else {
        axis.values = read_all_strings(d.get());
      }
      if (axis.values.size() != grid[i]) throw not_ours("axis '" + name + "' does not match the grid");
      r.axes_.push_back(std::move(axis));
    }
  }
  if (r.axes_.empty()) throw not_ours("'status' is not a grid");
  // Columns (and the tile-size coordinates), in creation order when the file tracks it.
  H5G_info_t info;
  h5::check(H5Gget_info(root, &info), "H5Gget_info");
  std::set<std::string> axis_names;
  for (const GridAxis& a : r.axes_) axis_names.insert(a.name);
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    char name[512] = "";
    if (H5Lget_name_by_idx(root, ".", H5_INDEX_CRT_ORDER, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT) < 0 &&
        H5Lget_name_by_idx(root, ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT) < 0)
      throw h5::H5Error(file.string() + ": cannot list its variables (damaged file?)");
    if (axis_names.contains(name)) continue;
    h5::Dataset d(H5Dopen2(root, name, H5P_DEFAULT));
    if (d.get() < 0) continue;  // a group or another object
    if (const std::string of = read_string_attribute(d.get(), kAuxiliaryAttribute); !of.empty()) {
      for (GridAxis& a : r.axes_)
        if (a.name == of)
          a.auxiliary.push_back({name, read_string_attribute(d.get(), "long_name"), read_string_attribute(d.get(), "units"),
                                 read_all_numbers<std::int64_t>(d.get(), H5T_NATIVE_INT64),
                                 read_string_attribute(d.get(), "comment")});
      continue;
    }
    const std::string type = read_string_attribute(d.get(), kTypeAttribute);
    if (type.empty()) continue;  // an extra dimension's coordinate, or not ours
    ColumnDef c{name, type == "f64" ? ColumnDef::Type::f64 : type == "i64" ? ColumnDef::Type::i64 : ColumnDef::Type::str,
                read_string_attribute(d.get(), "units"), read_string_attribute(d.get(), "long_name"), std::nullopt};
    const std::vector<hsize_t> dims = dataset_dims(d.get());
    const bool grid_shaped = (dims.size() == grid.size() || dims.size() == grid.size() + 1) &&
                             std::equal(grid.begin(), grid.end(), dims.begin());
    if (!grid_shaped) throw h5::H5Error(file.string() + ": column '" + c.name + "' does not have the grid's shape (damaged file?)");
    if (dims.size() == grid.size() + 1) {
      ExtraDimension e;
      e.name = scale_name(d.get(), static_cast<unsigned>(grid.size()));
      if (e.name.empty()) throw h5::H5Error(file.string() + ": column '" + c.name + "': its last dimension has no scale");
      const h5::Dataset scale(H5Dopen2(root, e.name.c_str(), H5P_DEFAULT), ("H5Dopen2 " + e.name).c_str());
      e.long_name = read_string_attribute(scale.get(), "long_name");
      const h5::Datatype t(H5Dget_type(scale.get()), "H5Dget_type");
      if (H5Tget_class(t.get()) == H5T_STRING) e.labels = read_all_strings(scale.get());
      else {
        e.numbers = read_all_numbers<std::int64_t>(scale.get(), H5T_NATIVE_INT64);
        e.units = read_string_attribute(scale.get(), "units");
      }
      c.extra = std::move(e);
    }
    r.columns_.push_back(c);
    r.datasets_.emplace(c.name, std::move(d));
  }
  if (!r.datasets_.contains(kStatusColumn)) throw not_ours("no 'status' column");
  return r;
} catch (const h5::H5Error& e) {
  rethrow_naming(file, e);
}

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
