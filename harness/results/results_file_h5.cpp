// HDF5 helpers of the results file: UTF-8 strings, scalar attributes written and read,
// whole datasets read, HDF5 errors that name the file; and the HDF5 library's version.
#include "harness/results/results_file_h5.hpp"

namespace fp8lab {
namespace results_detail {

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

namespace {

H5T_class_t attribute_class(hid_t object, const std::string& name) {
  const h5::Attribute attribute(H5Aopen(object, name.c_str(), H5P_DEFAULT), "H5Aopen");
  const h5::Datatype type(H5Aget_type(attribute.get()), "H5Aget_type");
  return H5Tget_class(type.get());
}

}  // namespace

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

}  // namespace results_detail

std::string hdf5_library_version() {
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
}

}  // namespace fp8lab
