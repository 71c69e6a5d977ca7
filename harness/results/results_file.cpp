#include "harness/results/results_file.hpp"

#include <hdf5_hl.h>

#include <cstring>

namespace fp8lab {
namespace {

constexpr const char* kRunDimension = "run";
constexpr hsize_t kChunk = 256;

h5::Datatype string_type() {
  h5::Datatype t(H5Tcopy(H5T_C_S1), "H5Tcopy");
  h5::check(H5Tset_size(t.get(), H5T_VARIABLE), "H5Tset_size");
  h5::check(H5Tset_cset(t.get(), H5T_CSET_UTF8), "H5Tset_cset");
  return t;
}

hid_t memory_type(ColumnDef::Type type) {
  return type == ColumnDef::Type::f64 ? H5T_NATIVE_DOUBLE : H5T_NATIVE_INT64;
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

std::string read_string_attribute(hid_t object, const std::string& name) {
  if (H5Aexists(object, name.c_str()) <= 0) return "";
  const h5::Attribute attribute(H5Aopen(object, name.c_str(), H5P_DEFAULT), "H5Aopen");
  const h5::Datatype type = string_type();
  char* text = nullptr;
  h5::check(H5Aread(attribute.get(), type.get(), &text), "H5Aread");
  std::string value = text ? text : "";
  H5free_memory(text);
  return value;
}

h5::Dataset create_column(hid_t file, const std::string& name, hid_t file_type) {
  const hsize_t initial = 0, maximum = H5S_UNLIMITED;
  const h5::Dataspace space(H5Screate_simple(1, &initial, &maximum), "H5Screate_simple");
  const h5::PropertyList properties(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate");
  h5::check(H5Pset_chunk(properties.get(), 1, &kChunk), "H5Pset_chunk");
  return h5::Dataset(H5Dcreate2(file, name.c_str(), file_type, space.get(), H5P_DEFAULT, properties.get(), H5P_DEFAULT),
                     ("H5Dcreate2 " + name).c_str());
}

// Extends a 1-D dataset by one element and writes `data` (of memory type `type`) there.
void append_element(hid_t dataset, std::int64_t row, hid_t type, const void* data) {
  const hsize_t new_size = static_cast<hsize_t>(row) + 1, offset = static_cast<hsize_t>(row), count = 1;
  h5::check(H5Dset_extent(dataset, &new_size), "H5Dset_extent");
  const h5::Dataspace file_space(H5Dget_space(dataset), "H5Dget_space");
  h5::check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &offset, nullptr, &count, nullptr),
            "H5Sselect_hyperslab");
  const h5::Dataspace memory_space(H5Screate_simple(1, &count, nullptr), "H5Screate_simple");
  h5::check(H5Dwrite(dataset, type, memory_space.get(), file_space.get(), H5P_DEFAULT, data), "H5Dwrite");
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

}  // namespace

std::string hdf5_library_version() {
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
}

ResultsFile ResultsFile::create(const std::filesystem::path& file, const std::vector<ColumnDef>& columns,
                                const std::map<std::string, std::string>& root_attributes) try {
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors become exceptions with our messages, not stack dumps
  ResultsFile r;
  r.path_ = file;
  r.columns_ = columns;
  // Track link creation order so readers list variables as defined (axes, then metrics).
  const h5::PropertyList create(H5Pcreate(H5P_FILE_CREATE), "H5Pcreate");
  h5::check(H5Pset_link_creation_order(create.get(), H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED),
            "H5Pset_link_creation_order");
  r.file_ = h5::File(H5Fcreate(file.c_str(), H5F_ACC_EXCL, create.get(), H5P_DEFAULT),
                     ("H5Fcreate " + file.string()).c_str());
  r.run_ = create_column(r.file_.get(), kRunDimension, H5T_STD_I64LE);
  h5::check(H5DSset_scale(r.run_.get(), kRunDimension), "H5DSset_scale");
  write_string_attribute(r.run_.get(), "long_name", "index of the grid point in this file");
  write_string_attribute(r.run_.get(), "units", "1");
  const h5::Datatype strings = string_type();
  for (const ColumnDef& c : columns) {
    const hid_t file_type = c.type == ColumnDef::Type::str ? strings.get()
                            : c.type == ColumnDef::Type::f64 ? H5T_IEEE_F64LE : H5T_STD_I64LE;
    h5::Dataset d = create_column(r.file_.get(), c.name, file_type);
    h5::check(H5DSattach_scale(d.get(), r.run_.get(), 0), "H5DSattach_scale");
    write_string_attribute(d.get(), "units", c.units);
    write_string_attribute(d.get(), "long_name", c.long_name);
    write_string_attribute(d.get(), "fp8lab_type", type_name(c.type));
    r.datasets_.emplace(c.name, std::move(d));
  }
  for (const auto& [name, value] : root_attributes) write_string_attribute(r.file_.get(), name, value);
  h5::check(H5Fflush(r.file_.get(), H5F_SCOPE_GLOBAL), "H5Fflush");
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
  if (H5Lexists(r.file_.get(), kRunDimension, H5P_DEFAULT) <= 0)
    throw h5::H5Error(file.string() + ": not an fp8lab results file (no 'run' dimension)");
  r.run_ = h5::Dataset(H5Dopen2(r.file_.get(), kRunDimension, H5P_DEFAULT), "H5Dopen2 run");
  {
    const h5::Dataspace space(H5Dget_space(r.run_.get()), "H5Dget_space");
    hsize_t size = 0;
    H5Sget_simple_extent_dims(space.get(), &size, nullptr);
    r.rows_ = static_cast<std::int64_t>(size);
  }
  // Columns: every dataset carrying our type attribute, in name order.
  H5G_info_t info;
  h5::check(H5Gget_info(r.file_.get(), &info), "H5Gget_info");
  for (hsize_t i = 0; i < info.nlinks; ++i) {
    char name[512] = "";
    // Creation order when the file tracks it (fp8lab's do), else name order (files made elsewhere).
    if (H5Lget_name_by_idx(r.file_.get(), ".", H5_INDEX_CRT_ORDER, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT) < 0 &&
        H5Lget_name_by_idx(r.file_.get(), ".", H5_INDEX_NAME, H5_ITER_INC, i, name, sizeof name, H5P_DEFAULT) < 0)
      throw h5::H5Error(file.string() + ": cannot list its variables (damaged file?)");
    if (std::strcmp(name, kRunDimension) == 0) continue;
    h5::Dataset d(H5Dopen2(r.file_.get(), name, H5P_DEFAULT));
    if (d.get() < 0) continue;  // a group or another object: not a column
    const std::string type = read_string_attribute(d.get(), "fp8lab_type");
    if (type.empty()) continue;
    ColumnDef c{name, type == "f64" ? ColumnDef::Type::f64 : type == "i64" ? ColumnDef::Type::i64 : ColumnDef::Type::str,
                read_string_attribute(d.get(), "units"), read_string_attribute(d.get(), "long_name")};
    // A sweep killed between a row's columns and its `run` entry leaves longer columns:
    // trim them back to the last complete row before appending again.
    if (writable) {
      const hsize_t complete = static_cast<hsize_t>(r.rows_);
      h5::check(H5Dset_extent(d.get(), &complete), "H5Dset_extent");
    }
    {
      const h5::Dataspace space(H5Dget_space(d.get()), "H5Dget_space");
      hsize_t size = 0;
      if (H5Sget_simple_extent_ndims(space.get()) != 1 || H5Sget_simple_extent_dims(space.get(), &size, nullptr) < 0 ||
          size < static_cast<hsize_t>(r.rows_))
        throw h5::H5Error(file.string() + ": column '" + c.name + "' is not 1-D with one value per point (damaged file?)");
    }
    r.columns_.push_back(c);
    r.datasets_.emplace(c.name, std::move(d));
  }
  for (const char* required : {"grid_index", "point_key", "status"})
    if (!r.datasets_.contains(required))
      throw h5::H5Error(file.string() + ": not an fp8lab results file (no '" + required + "' column)");
  return r;
} catch (const h5::H5Error& e) {
  rethrow_naming(file, e);
}

void ResultsFile::close() {
  datasets_.clear();
  run_.reset();
  file_.reset();
}

hid_t ResultsFile::dataset(const std::string& name) const {
  const auto it = datasets_.find(name);
  if (it == datasets_.end()) throw h5::H5Error(path_.string() + ": no column '" + name + "'");
  return it->second.get();
}

void ResultsFile::append(const Row& row) try {
  // Check the whole row first so a bad row never leaves columns of different lengths.
  for (const ColumnDef& c : columns_) {
    const auto it = row.find(c.name);
    if (it == row.end()) throw std::invalid_argument("results row lacks column '" + c.name + "'");
    const bool ok = (c.type == ColumnDef::Type::f64 && std::holds_alternative<double>(it->second)) ||
                    (c.type == ColumnDef::Type::i64 && std::holds_alternative<std::int64_t>(it->second)) ||
                    (c.type == ColumnDef::Type::str && std::holds_alternative<std::string>(it->second));
    if (!ok) throw std::invalid_argument("results row: column '" + c.name + "' has the wrong type");
  }
  const h5::Datatype strings = string_type();
  for (const ColumnDef& c : columns_) {
    const Value& v = row.at(c.name);
    if (c.type == ColumnDef::Type::str) {
      const char* text = std::get<std::string>(v).c_str();
      append_element(dataset(c.name), rows_, strings.get(), &text);
    } else if (c.type == ColumnDef::Type::f64) {
      append_element(dataset(c.name), rows_, memory_type(c.type), &std::get<double>(v));
    } else {
      append_element(dataset(c.name), rows_, memory_type(c.type), &std::get<std::int64_t>(v));
    }
  }
  const std::int64_t index = rows_;
  append_element(run_.get(), rows_, H5T_NATIVE_INT64, &index);  // the scale last: a row counts once complete
  ++rows_;
  h5::check(H5Fflush(file_.get(), H5F_SCOPE_GLOBAL), "H5Fflush");
} catch (const h5::H5Error& e) {
  rethrow_naming(path_, e);
}

namespace {

template <class T>
std::vector<T> read_numbers(hid_t dataset, std::int64_t rows, hid_t memory_type) {
  std::vector<T> out(static_cast<std::size_t>(rows));
  if (rows == 0) return out;
  const hsize_t count = static_cast<hsize_t>(rows), offset = 0;
  const h5::Dataspace file_space(H5Dget_space(dataset), "H5Dget_space");
  h5::check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &offset, nullptr, &count, nullptr), "select");
  const h5::Dataspace memory(H5Screate_simple(1, &count, nullptr), "H5Screate_simple");
  h5::check(H5Dread(dataset, memory_type, memory.get(), file_space.get(), H5P_DEFAULT, out.data()), "H5Dread");
  return out;
}

}  // namespace

std::vector<double> ResultsFile::read_f64(const std::string& column) const try {
  return read_numbers<double>(dataset(column), rows_, H5T_NATIVE_DOUBLE);
} catch (const h5::H5Error& e) {
  rethrow_naming(path_, e);
}

std::vector<std::int64_t> ResultsFile::read_i64(const std::string& column) const try {
  return read_numbers<std::int64_t>(dataset(column), rows_, H5T_NATIVE_INT64);
} catch (const h5::H5Error& e) {
  rethrow_naming(path_, e);
}

std::vector<std::string> ResultsFile::read_str(const std::string& column) const try {
  std::vector<std::string> out;
  if (rows_ == 0) return out;
  const hsize_t count = static_cast<hsize_t>(rows_), offset = 0;
  const h5::Dataspace file_space(H5Dget_space(dataset(column)), "H5Dget_space");
  h5::check(H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, &offset, nullptr, &count, nullptr), "select");
  const h5::Dataspace memory(H5Screate_simple(1, &count, nullptr), "H5Screate_simple");
  const h5::Datatype strings = string_type();
  std::vector<char*> raw(static_cast<std::size_t>(rows_), nullptr);
  h5::check(H5Dread(dataset(column), strings.get(), memory.get(), file_space.get(), H5P_DEFAULT, raw.data()), "H5Dread");
  for (char* s : raw) out.emplace_back(s ? s : "");
  H5Dvlen_reclaim(strings.get(), memory.get(), H5P_DEFAULT, raw.data());
  return out;
} catch (const h5::H5Error& e) {
  rethrow_naming(path_, e);
}

std::string ResultsFile::root_attribute(const std::string& name) const try {
  return read_string_attribute(file_.get(), name);
} catch (const h5::H5Error& e) {
  rethrow_naming(path_, e);
}

void ResultsFile::set_root_attribute(const std::string& name, const std::string& value) try {
  write_string_attribute(file_.get(), name, value);
  h5::check(H5Fflush(file_.get(), H5F_SCOPE_GLOBAL), "H5Fflush");
} catch (const h5::H5Error& e) {
  rethrow_naming(path_, e);
}

}  // namespace fp8lab
