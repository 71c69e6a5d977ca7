#pragma once
// Reading results files back: a summary table, the regression comparison against a
// baseline, and merging shards.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace fp8lab {

// The table `fp8lab report` prints. A header (study, point counts, complete or not and how to
// resume, operands, the single-valued axes), then one row per value combination of `group_by`
// (default: every axis with more than one value, so one row per point) with the error
// metrics; when `group_by` leaves out a varying axis, the header says which axes were
// AVERAGED OVER and each row gives mean, min and max over its points that ran.
// max_rows > 0: more rows than that are not printed, a line says how to see them.
std::string report_table(const std::filesystem::path& file, std::vector<std::string> group_by = {},
                         std::size_t max_rows = 0);
// The same as JSON (fp8lab report --json): counts, grouping, rows with their metrics.
std::string report_json(const std::filesystem::path& file, std::vector<std::string> group_by = {});

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
  std::vector<std::string> new_points;       // "axis=value ..." of points only in NEW (not compared)
  std::size_t changed_within_tolerance = 0;  // values that differ but by no more than max(rtol |base|, floor)
  double rtol = 0, floor_scale = 0;
  bool floors_available = false;  // the baseline has the `k` column the floors need
  nlohmann::json json;  // everything above, for CI tools (fp8lab compare --json)
  std::string table() const;
  std::string json_text() const;
};

// Matches points by their axis values. Throws std::invalid_argument (one line) when the files
// are not the same grid: another study kind, other axes, or a baseline axis value NEW lacks.
// A metric got worse when it moved the bad way (errors and 1 - cosine up, SQNR down) by more
// than max(rtol |baseline|, floor_scale * its noise floor), a point's status changed (also to
// "not run"), or a column of the baseline is missing from NEW. Changes are stated in dB for
// SQNR, as differences of 1 - cosine, and in percent for the other errors.
Comparison compare_results(const std::filesystem::path& baseline, const std::filesystem::path& candidate, double rtol,
                           double floor_scale = 1.0);

// Writes `out` (must not exist) with every point the shards hold (the first file's where two
// hold one). The shards must come from the same spec and, unless allow_partial, be exactly
// shards 0..N-1 of one N, each complete; else std::invalid_argument says what is wrong.
struct MergeSummary {
  std::int64_t points_total = 0, points_done = 0;
  std::string problem;  // what --allow-partial let through ("" when the set was complete)
};
MergeSummary merge_results(const std::filesystem::path& out, const std::vector<std::filesystem::path>& shards,
                           bool allow_partial = false);

}  // namespace fp8lab
