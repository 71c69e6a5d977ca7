#pragma once
// Internal to ResultsFile (results_file*.cpp): the marks fp8lab writes on its variables, and
// the HDF5 helpers that creating, opening and the point I/O share (results_file_h5.cpp).
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "harness/results/h5_handles.hpp"
#include "harness/results/results_file.hpp"

namespace fp8lab::results_detail {

// Marks fp8lab writes on each variable, so a file is read back without guessing.
constexpr const char* kTypeAttribute = "fp8lab_type";           // on columns: f64, i64, str
constexpr const char* kAxisAttribute = "fp8lab_axis";           // on axes: how values are stored
constexpr const char* kAuxiliaryAttribute = "fp8lab_auxiliary_of";  // on tile-size coordinates: the axis
constexpr const char* kStatusColumn = "status";

inline bool numeric_axis(AxisStorage s) { return s == AxisStorage::integer || s == AxisStorage::promotion; }

h5::Datatype string_type();
void write_string_attribute(hid_t object, const std::string& name, const std::string& value);
void write_number_attribute(hid_t object, const std::string& name, hid_t file_type, hid_t memory_type, const void* value);
void write_i64_attribute(hid_t object, const std::string& name, std::int64_t value);
std::string read_string_attribute(hid_t object, const std::string& name);
std::optional<std::int64_t> read_i64_attribute(hid_t object, const std::string& name);
[[noreturn]] void rethrow_naming(const std::filesystem::path& file, const h5::H5Error& e);
std::vector<std::string> read_all_strings(hid_t dataset);

template <class T>
std::vector<T> read_all_numbers(hid_t dataset, hid_t memory_type) {
  const h5::Dataspace space(H5Dget_space(dataset), "H5Dget_space");
  std::vector<T> out(static_cast<std::size_t>(std::max<hssize_t>(H5Sget_simple_extent_npoints(space.get()), 0)));
  if (!out.empty()) h5::check(H5Dread(dataset, memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()), "H5Dread");
  return out;
}

}  // namespace fp8lab::results_detail
