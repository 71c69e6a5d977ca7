#pragma once
// The results file of a study (DESIGN.md section 5): one 1-D dataset per parameter and per
// metric along an extendible `run` dimension, `run` itself a dimension scale attached to all
// of them (so xarray.open_dataset(f, engine="h5netcdf") names the dimension), `units` and
// `long_name` on every variable, provenance as root attributes. Default file format (not
// "latest"), and a flush after every appended row: a killed sweep leaves a readable file
// with every finished point.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "harness/results/h5_handles.hpp"

namespace fp8lab {

struct ColumnDef {
  enum class Type { f64, i64, str };
  std::string name;
  Type type = Type::f64;
  std::string units;      // "1" for dimensionless, "dB", "s", ...
  std::string long_name;  // what a plot axis says
};

using Value = std::variant<double, std::int64_t, std::string>;
using Row = std::map<std::string, Value>;

class ResultsFile {
 public:
  // Creates `file` (which must not exist) with the given columns and root attributes.
  static ResultsFile create(const std::filesystem::path& file, const std::vector<ColumnDef>& columns,
                            const std::map<std::string, std::string>& root_attributes);
  // Opens an existing results file for appending (resume) or reading. Throws H5Error naming
  // the file when it is not one fp8lab wrote: no `run` dimension, no point_key / status /
  // grid_index column, or a column shorter than `run`.
  static ResultsFile open(const std::filesystem::path& file, bool writable);

  std::int64_t rows() const { return rows_; }
  const std::vector<ColumnDef>& columns() const { return columns_; }
  // Appends one row (every column must be present with its type) and flushes the file.
  void append(const Row& row);
  std::vector<double> read_f64(const std::string& column) const;
  std::vector<std::int64_t> read_i64(const std::string& column) const;
  std::vector<std::string> read_str(const std::string& column) const;
  std::string root_attribute(const std::string& name) const;  // "" when absent
  void close();  // releases the file (it stays on disk); no other call is valid afterwards
  void set_root_attribute(const std::string& name, const std::string& value);

 private:
  ResultsFile() = default;
  hid_t dataset(const std::string& name) const;

  std::filesystem::path path_;
  h5::File file_;
  std::vector<ColumnDef> columns_;
  std::map<std::string, h5::Dataset> datasets_;
  h5::Dataset run_;
  std::int64_t rows_ = 0;
};

std::string hdf5_library_version();

}  // namespace fp8lab
