#pragma once
// Reading results files back: a summary table, the regression comparison against a
// baseline, and merging shards.
#include <filesystem>
#include <string>
#include <vector>

namespace fp8lab {

// The table `fp8lab report` prints: the axes that vary, status, and the error metrics; one
// row per point up to kFullReportRows points, otherwise grouped by `group_by` (default: the
// varying axes but layer, gemm, seed and distribution) with count, mean, min and max.
inline constexpr std::int64_t kFullReportRows = 40;
std::string report_table(const std::filesystem::path& file, std::vector<std::string> group_by = {});

// Absolute noise floors of the comparison (derived in results_report.cpp). eta is the relative
// noise of an FP64 GEMM reference with reduction length k: how far two valid FP64 evaluations
// (another summation order, FMA, platform) can put the reference, and the FP64 GEMM of the
// dequantized operands, apart, normwise relative to ||C|| and elementwise relative to its RMS.
double reference_noise(std::int64_t k);
// The floor of one metric column (by its suffix: _rel_frobenius, _sqnr_db, _deepgemm_diff,
// _one_minus_cosine, _max_abs, _max_rel) at its baseline value; _max_abs needs the point's
// reference_rms (NaN: no floor). 0 for any other column.
double noise_floor(const std::string& metric, double baseline_value, double eta, double reference_rms);
// One line per metric: the floor formulas, for --help and the report.
std::string noise_floor_rules();

struct Comparison {
  std::size_t points = 0, metrics = 0;
  std::vector<std::string> worse;  // one formatted table line per regression
  std::vector<std::string> missing_columns;  // in the baseline, not in NEW (each also a line of `worse`)
  std::vector<std::string> new_columns;      // in NEW, not in the baseline (not compared)
  std::size_t changed_within_tolerance = 0;  // values that differ but by no more than max(rtol |base|, floor)
  double rtol = 0, floor_scale = 0;
  bool floors_available = false;  // the baseline has the `k` column the floors need
  std::string table() const;
};

// Matches points by key. A metric got worse when it moved the bad way (errors and 1 - cosine
// up, SQNR down) by more than max(rtol |baseline|, floor_scale * its noise floor), a point is
// missing from NEW, its status changed, or a column of the baseline is missing from NEW.
Comparison compare_results(const std::filesystem::path& baseline, const std::filesystem::path& candidate, double rtol,
                           double floor_scale = 1.0);

// Writes `out` (must not exist) with every row of the shards, in grid order, duplicates
// dropped; the shards must come from the same spec.
void merge_results(const std::filesystem::path& out, const std::vector<std::filesystem::path>& shards);

}  // namespace fp8lab
