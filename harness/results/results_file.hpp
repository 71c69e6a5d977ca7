#pragma once
// The results file of a study (DESIGN.md section 5; layout: the grid contract in
// experiments/README.md "The results file"). A study is the product of its axes, and the file
// stores it as that grid, so that xarray.open_dataset(f, engine="h5netcdf") needs no reshaping:
//   - every axis a 1-D dataset /<axis> (its values in spec order), made the HDF5 dimension scale
//     <axis>: integers as int64, "promotion" as int64 with "never" stored as 0, categories as
//     UTF-8 strings; granularity axes carry int64 auxiliary coordinates <axis>_tile_rows/_cols;
//   - every column an N-D dataset over all axes (kind's axis order, last fastest), optionally
//     with one extra trailing dimension (per layer, per step) that is a dimension scale too;
//     f64 filled with NaN, int64 with INT64_MIN, strings with "" until the point is written;
//   - `units` on every numeric variable, `long_name` on every variable, provenance as root
//     attributes.
// The whole grid exists from creation; write_point() fills one point's element of every
// column and flushes, so a killed sweep leaves a readable file with every finished point.
#include <cstdint>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "harness/results/h5_handles.hpp"

namespace fp8lab {

// How an axis's values are stored (the spec gives them as text).
enum class AxisStorage {
  string,       // variable-length UTF-8
  integer,      // int64 (seed, K, tokens ...)
  promotion,    // int64 with "never" stored as kNeverPromotion (documented on the variable)
  granularity,  // string, plus <axis>_tile_rows / <axis>_tile_cols int64 coordinates
};

inline constexpr std::int64_t kNeverPromotion = 0;
inline constexpr std::int64_t kMissingInteger = std::numeric_limits<std::int64_t>::min();

// An int64 coordinate along an axis's dimension besides the axis itself (tile sizes, the
// values of a parameter axis). A value kMissingInteger is written as the _FillValue, which
// xarray reads as NaN.
struct AuxiliaryCoordinate {
  std::string name, long_name, units;
  std::vector<std::int64_t> values;  // one per axis value
  std::string comment = "-1: the whole extent (one scale spans that dimension)";
};

struct GridAxis {
  std::string name, long_name;
  AxisStorage storage = AxisStorage::string;
  std::vector<std::string> values;  // as in the spec ("never" for no promotion)
  std::vector<AuxiliaryCoordinate> auxiliary;
};

// A trailing dimension of one column beyond the grid axes: e.g. the layers of a model for a
// per-layer gradient error, or the steps of a training trajectory. Its coordinate values are
// numbers (steps) or labels (layer names): exactly one of the two vectors is non-empty.
struct ExtraDimension {
  std::string name, long_name, units = "1";
  std::vector<std::int64_t> numbers;
  std::vector<std::string> labels;
  std::size_t size() const { return numbers.empty() ? labels.size() : numbers.size(); }
};

struct ColumnDef {
  enum class Type { f64, i64, str };
  std::string name;
  Type type = Type::f64;
  std::string units;      // "1" dimensionless, "dB", "s", "byte", ...; ignored (none written) for strings
  std::string long_name;  // what a plot axis says
  std::optional<ExtraDimension> extra{};  // only with Type::f64; the Value is then a vector of extra->size()
};

using Value = std::variant<double, std::int64_t, std::string, std::vector<double>>;
using Row = std::map<std::string, Value>;

class ResultsFile {
 public:
  // Creates `file` (which must not exist) holding the whole grid of `axes` x `columns`, every
  // element at its fill value, and the root attributes (strings) and counters (int64).
  static ResultsFile create(const std::filesystem::path& file, const std::vector<GridAxis>& axes,
                            const std::vector<ColumnDef>& columns, const std::map<std::string, std::string>& attributes,
                            const std::map<std::string, std::int64_t>& counters = {});
  // Opens a file fp8lab wrote, for writing more points (resume) or for reading. Throws H5Error
  // naming the file when it is not one: no `status` grid variable, or a column whose shape is
  // not the grid's.
  static ResultsFile open(const std::filesystem::path& file, bool writable);

  const std::filesystem::path& path() const { return path_; }
  const std::vector<GridAxis>& axes() const { return axes_; }
  const std::vector<ColumnDef>& columns() const { return columns_; }
  bool has_column(const std::string& name) const { return datasets_.contains(name); }
  std::int64_t points() const;  // the product of the axis lengths
  // The axis values of point `index` (last axis fastest), and its index from per-axis positions.
  std::vector<std::string> point_values(std::int64_t index) const;

  // Writes point `index`'s element of every column in `row` (every column must be present with
  // its type; vectors of the extra dimension's length), then the counters as root attributes,
  // then flushes the file.
  void write_point(std::int64_t index, const Row& row, const std::map<std::string, std::int64_t>& counters = {});
  // Every point's element of a column at once (grid order, extra dimension fastest), then a flush:
  // for a writer that has its whole grid in hand (fp8lab.torch's recorder). `status` last, as
  // write_point does, so the points count as done only once the rest is written.
  void write_column(const std::string& column, const std::vector<double>& values);
  void write_column(const std::string& column, const std::vector<std::string>& values);
  // A whole column, flattened in grid order (extra dimension fastest).
  std::vector<double> read_f64(const std::string& column) const;
  std::vector<std::int64_t> read_i64(const std::string& column) const;
  std::vector<std::string> read_str(const std::string& column) const;
  // One point's value of every column (for merge): the Value alternative of each column's type.
  Row read_point(std::int64_t index) const;

  std::string root_attribute(const std::string& name) const;  // "" when absent (or not a string)
  std::optional<std::int64_t> root_counter(const std::string& name) const;
  void set_root_attribute(const std::string& name, const std::string& value);
  void set_root_counter(const std::string& name, std::int64_t value);
  void close();  // releases the file (it stays on disk); no other call is valid afterwards

 private:
  ResultsFile() = default;
  hid_t dataset(const std::string& name) const;
  // The file selection of one grid point's element of column c (with all of c's extra
  // dimension), and the memory space that element reads into or writes from.
  struct PointSelection {
    h5::Dataspace file, memory;
  };
  PointSelection select_point(std::int64_t index, const ColumnDef& c) const;
  void flush();

  std::filesystem::path path_;
  h5::File file_;
  std::vector<GridAxis> axes_;
  std::vector<ColumnDef> columns_;
  std::map<std::string, h5::Dataset> datasets_;
};

std::string hdf5_library_version();

}  // namespace fp8lab
