#pragma once
// A kind of study: its axes, the settings it reads, which grid points are invalid (and
// why), and the computation and metrics of one point. The runner (harness/study/runner)
// knows nothing else about it, so a new kind is a new file plus one line in study_kinds.cpp.
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <optional>
#include <string>
#include <vector>

#include "harness/results/results_file.hpp"
#include "kernels/backend.hpp"
#include "harness/study/study_spec.hpp"

namespace fp8lab {

// An axis that means something for some values of another axis only: the loss-scaling
// study's `sigma` and `seed` shape its synthetic "lognormal" tensor and no real one. Such a
// parameter axis is no dimension of the grid: the owner axis gets one entry per value it does
// not apply to and one per combination of its values where it does (harness/study/grid.hpp),
// so no grid cell exists that means nothing.
struct ParameterOf {
  std::string axis;                 // the owner axis ("tensor")
  std::vector<std::string> values;  // the owner's values it applies to ("lognormal")
};

struct AxisDef {
  std::string name;
  std::vector<std::string> defaults;  // used when the spec does not list the axis
  std::string long_name;
  // How the results file stores the values (harness/results/results_file.hpp): strings unless
  // said otherwise; integer axes (seed, K, tokens) as int64, "promotion" as int64 with "never"
  // = 0, granularity axes as strings plus their tile sizes as int64 coordinates. A parameter
  // axis (below) must be integer: it is stored as an int64 coordinate along its owner.
  AxisStorage storage = AxisStorage::string;
  std::optional<ParameterOf> parameter_of{};  // set for a parameter axis
};

// One grid point: a value for every axis of the kind that applies to it (a parameter axis
// only where its owner has one of the values it applies to), dimensions in the kind's axis
// order with each owner's parameters right after it.
struct Point {
  std::vector<std::pair<std::string, std::string>> values;
  const std::string& at(const std::string& axis) const;
  std::string key() const;  // "axis=value;..." identifies the point across runs (resume, compare)
};

class Backend;

struct RunContext {
  int threads = 0;
  Backend* backend = nullptr;  // the one the run selected (--backend)
  bool quiet = false;          // no progress of a long point on stderr (--quiet)
  // Where a kind whose points run long keeps their checkpoints and side outputs: files named
  // after the results file (RESULTS.checkpoints/, RESULTS.weights/). resume: this command
  // completes an interrupted file (--resume), so a point's checkpoint is continued, not ignored.
  std::filesystem::path results_file;
  bool resume = false;
};

// Thrown by evaluate when a point gives no number (an operand not finite in the precision
// the kernel sees, an FP32 output that overflowed): the runner writes the point with status
// "failed" and this message as its reason, and goes on.
class PointFailure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// What one point will allocate at its peak, and the spec field to blame when it is too much.
struct MemoryEstimate {
  std::uint64_t bytes = 0;
  std::string field;
};

class StudyKind {
 public:
  virtual ~StudyKind() = default;
  virtual std::string name() const = 0;
  virtual std::vector<AxisDef> axes() const = 0;
  // Throws std::invalid_argument for a value the axis cannot take (the spec loader adds
  // file, line and column).
  virtual void validate_value(const std::string& axis, const std::string& value) const = 0;
  // Reads settings; throws SpecError naming the field.
  virtual void configure(const StudySpec& spec) = 0;
  // Whole-grid checks that are errors, not skips (e.g. a layer too small for a tile); the
  // message names the axis.
  virtual void check_grid(const StudySpec& spec, const std::vector<Point>& points) const = 0;
  // Why a point is an invalid combination, or one this backend cannot run; nothing when it runs.
  virtual std::optional<std::string> skip_reason(const Point& point, const Backend& backend) const = 0;
  // Columns the kind writes besides the axes: derived numbers and metrics (a column may have
  // an extra trailing dimension: ColumnDef::extra, its Value a std::vector<double>). The runner
  // adds status, reason, operands and elapsed_seconds itself.
  virtual std::vector<ColumnDef> result_columns() const = 0;
  // The values of result_columns() for one point: every column.
  virtual Row evaluate(const Point& point, const RunContext& context) = 0;
  // What is known of a skipped or failed point (e.g. its shape); columns left out keep their
  // fill value (NaN, INT64_MIN, "").
  virtual Row skipped_row(const Point& point) const = 0;
  // Peak memory of evaluating the point (the runner refuses a grid that cannot fit).
  virtual MemoryEstimate memory_estimate(const Point&) const { return {}; }
  // Root attribute: where operand values come from, for the study as a whole.
  virtual std::string operand_description() const = 0;
  // Further root attributes: settings that shape every point and are no axis (e.g. the
  // training step's attention kind), so that a reader need not parse spec_toml for them.
  virtual std::map<std::string, std::string> settings_attributes() const { return {}; }
  // Where this point's operand values come from, true for the point: "stories260K real tensor
  // L3.w1 (sha256 ...)" or "synthetic gaussian, outlier_channels=16, ..., seed=3". Written to
  // the `operands` variable; files named as "PATH (sha256 HEX)" are checked on --resume/merge.
  virtual std::string operand_provenance(const Point&) const { return operand_description(); }
  // Relative cost of evaluating the point (e.g. its FLOPs): weights the progress ETA.
  virtual double point_cost(const Point&) const { return 1.0; }
  // Called once the point's row is in the results file (flushed): what the kind kept until the
  // row was safe (a training run's checkpoint) may go now.
  virtual void point_recorded(const Point&, const RunContext&) {}
};

std::unique_ptr<StudyKind> make_study_kind(const std::string& name);  // nullptr when unknown
std::vector<std::string> study_kind_names();
// A kind defined outside the harness library (the Python package's torch_train), known to
// make_study_kind from then on in this process.
void register_study_kind(const std::string& name, std::function<std::unique_ptr<StudyKind>()> make);

}  // namespace fp8lab
