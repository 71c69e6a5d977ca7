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

struct Comparison {
  std::size_t points = 0, metrics = 0;
  std::vector<std::string> worse;  // one formatted table line per regression
  std::vector<std::string> missing_columns;  // in the baseline, not in NEW (each also a line of `worse`)
  std::vector<std::string> new_columns;      // in NEW, not in the baseline (not compared)
  std::string table() const;
};

// Matches points by key. A metric got worse when an error (1 - cosine included) grew by more
// than rtol (relative), SQNR fell by more, a point is missing from NEW, its status changed, or
// a column of the baseline is missing from NEW.
Comparison compare_results(const std::filesystem::path& baseline, const std::filesystem::path& candidate, double rtol);

// Writes `out` (must not exist) with every row of the shards, in grid order, duplicates
// dropped; the shards must come from the same spec.
void merge_results(const std::filesystem::path& out, const std::vector<std::filesystem::path>& shards);

}  // namespace fp8lab
