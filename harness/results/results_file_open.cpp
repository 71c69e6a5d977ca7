// Opening a results file fp8lab wrote: the axes read back from the dimension scales of
// `status`, then the columns (and the tile-size coordinates) in creation order.
#include "harness/results/results_file.hpp"

#include <hdf5_hl.h>

#include <algorithm>
#include <set>

#include "harness/results/results_file_h5.hpp"

namespace fp8lab {
using namespace results_detail;
namespace {

AxisStorage parse_storage(const std::string& s) {
  return s == "integer" ? AxisStorage::integer
         : s == "promotion" ? AxisStorage::promotion
         : s == "granularity" ? AxisStorage::granularity
                              : AxisStorage::string;
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

}  // namespace fp8lab
