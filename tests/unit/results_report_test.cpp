// fp8lab compare's absolute noise floors: changes of a metric below the floor of its point
// compare equal even where the relative tolerance alone would call them worse (values at the
// noise level), and a real regression above the floor is still reported, floor shown.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "harness/results/results_file.hpp"
#include "harness/results/results_report.hpp"
#include "tests/support/temp_dir.hpp"

using namespace fp8lab;

namespace {

constexpr const char* kMetrics[] = {"total_rel_frobenius", "total_sqnr_db",  "total_deepgemm_diff",
                                    "total_one_minus_cosine", "total_max_abs", "total_max_rel"};
constexpr std::int64_t kK = 4096;
constexpr double kRms = 50.0;

// One point with K = 4096 (eta ~ 1.2e-10) and the given metric values.
void write_results(const std::filesystem::path& file, const std::map<std::string, double>& metrics) {
  std::vector<ColumnDef> columns = {{"grid_index", ColumnDef::Type::i64, "1", "index in the grid"},
                                    {"point_key", ColumnDef::Type::str, "", "point"},
                                    {"status", ColumnDef::Type::str, "", "status"},
                                    {"k", ColumnDef::Type::i64, "1", "K"},
                                    {"reference_rms", ColumnDef::Type::f64, "1", "RMS of the reference"}};
  for (const auto& [name, value] : metrics) columns.push_back({name, ColumnDef::Type::f64, "1", name});
  ResultsFile f = ResultsFile::create(file, columns, {{"study", "floors"}});
  Row row = {{"grid_index", std::int64_t{0}}, {"point_key", std::string("layer=x")}, {"status", std::string("ok")}, {"k", kK}, {"reference_rms", kRms}};
  for (const auto& [name, value] : metrics) row[name] = value;
  f.append(row);
}

// Noise-level values: an error that is exactly zero in exact arithmetic (dequantized ==
// original operands), seen through FP64 rounding only.
std::map<std::string, double> noise_level() {
  return {{"total_rel_frobenius", 3e-17}, {"total_sqnr_db", 330.0},     {"total_deepgemm_diff", 5e-34},
          {"total_one_minus_cosine", 4e-34}, {"total_max_abs", 2e-15},  {"total_max_rel", 1e-15}};
}

}  // namespace

TEST_CASE("compare: the floor formulas (eta = 4 sqrt(K) gamma_(K+1))") {
  const double u = 0x1p-53;
  CHECK(reference_noise(256) == Approx(4.0 * 16.0 * 257.0 * u / (1.0 - 257.0 * u)).epsilon(1e-14));
  CHECK(reference_noise(256) < 2e-12);
  CHECK(reference_noise(7168) < 3e-10);
  const double eta = 1e-10;
  CHECK(noise_floor("total_rel_frobenius", 0.5, eta, kRms) == Approx(1.5e-10));
  CHECK(noise_floor("accumulation_sqnr_db", 60.0, eta, kRms) == Approx(20.0 * std::log10(1.0 + eta * 1.001 / 1e-3)));
  CHECK(std::isinf(noise_floor("accumulation_sqnr_db", std::numeric_limits<double>::infinity(), eta, kRms)));
  CHECK(noise_floor("quantization_deepgemm_diff", 0.04, eta, kRms) == Approx(eta * (2 * 0.2 + 3 * 0.04 + eta)));
  CHECK(noise_floor("total_one_minus_cosine", 0.02, eta, kRms) == Approx(4 * eta * 0.2 + 8 * eta * eta));
  CHECK(noise_floor("total_max_abs", 3.0, eta, kRms) == Approx(2 * eta * kRms));
  CHECK(noise_floor("total_max_abs", 3.0, eta, std::nan("")) == 0.0);  // no reference_rms column: no floor
  CHECK(noise_floor("total_max_rel", 0.5, eta, kRms) == Approx(150 * eta));
  CHECK(noise_floor("seconds", 0.5, eta, kRms) == 0.0);
}

TEST_CASE("compare: changes below the noise floor compare equal; rtol alone would call them worse") {
  test::TempDir dir;
  const double eta = reference_noise(kK);
  const std::map<std::string, double> base = noise_level();
  std::map<std::string, double> next = base;
  for (const char* m : kMetrics) {  // each moved the bad way by half its floor
    const double half = 0.5 * noise_floor(m, base.at(m), eta, kRms);
    next[m] += std::string(m).ends_with("_sqnr_db") ? -half : half;
    INFO(m << ": " << base.at(m) << " -> " << next[m]);
    CHECK(std::fabs(next[m] - base.at(m)) > 1e-6 * std::fabs(base.at(m)));  // beyond the default rtol
  }
  write_results(dir / "base.h5", base);
  write_results(dir / "next.h5", next);
  const Comparison c = compare_results(dir / "base.h5", dir / "next.h5", 1e-6);
  INFO(c.table());
  CHECK(c.metrics == 6);
  CHECK(c.worse.empty());
  CHECK(c.changed_within_tolerance == 6);
  CHECK_THAT(c.table(), Catch::Contains("0 worse") && Catch::Contains("noise floor"));
  const Comparison relative_only = compare_results(dir / "base.h5", dir / "next.h5", 1e-6, /*floor_scale=*/0.0);
  CHECK(relative_only.worse.size() == 6);
  CHECK_THAT(relative_only.table(), Catch::Contains("noise floors off"));
}

TEST_CASE("compare: a regression above the floor is worse, with the floor shown") {
  test::TempDir dir;
  const double eta = reference_noise(kK);
  // FP32-accumulation-sized errors, each made 20% worse: far above floors of ~1e-10 relative.
  const std::map<std::string, double> base = {{"total_rel_frobenius", 1e-7},    {"total_sqnr_db", 140.0},
                                              {"total_deepgemm_diff", 5e-15},   {"total_one_minus_cosine", 5e-15},
                                              {"total_max_abs", 1e-5},          {"total_max_rel", 1e-6}};
  std::map<std::string, double> next = base;
  for (const char* m : kMetrics) next[m] = std::string(m).ends_with("_sqnr_db") ? base.at(m) - 1.6 : 1.2 * base.at(m);
  write_results(dir / "base.h5", base);
  write_results(dir / "next.h5", next);
  const Comparison c = compare_results(dir / "base.h5", dir / "next.h5", 1e-6);
  INFO(c.table());
  REQUIRE(c.worse.size() == 6);
  char floor[32];
  std::snprintf(floor, sizeof floor, "%.4g", noise_floor("total_rel_frobenius", 1e-7, eta, kRms));
  CHECK_THAT(c.table(), Catch::Matches("(.|\n)*total_rel_frobenius +1e-07 +1.2e-07 +20% +" + std::string(floor) + " +layer=x(.|\n)*"));

  // From the noise level to a real error: worse, however small the baseline.
  std::map<std::string, double> noise = noise_level(), broken = noise_level();
  broken["total_rel_frobenius"] = 1e-8;
  write_results(dir / "noise.h5", noise);
  write_results(dir / "broken.h5", broken);
  const Comparison b = compare_results(dir / "noise.h5", dir / "broken.h5", 1e-6);
  INFO(b.table());
  REQUIRE(b.worse.size() == 1);
  CHECK_THAT(b.worse[0], Catch::StartsWith("total_rel_frobenius"));
}

TEST_CASE("compare: a baseline column missing from NEW is reported, not skipped") {
  test::TempDir dir;
  std::map<std::string, double> base = noise_level(), next = noise_level();
  base["total_cosine"] = 1.0;  // a column renamed since the baseline was written
  write_results(dir / "base.h5", base);
  write_results(dir / "next.h5", next);
  const Comparison c = compare_results(dir / "base.h5", dir / "next.h5", 1e-6);
  INFO(c.table());
  REQUIRE(c.missing_columns == std::vector<std::string>{"total_cosine"});
  REQUIRE(c.worse.size() == 1);
  CHECK_THAT(c.worse[0], Catch::StartsWith("(column) total_cosine") && Catch::Contains("missing"));
  CHECK_THAT(c.table(), Catch::Contains("regenerate the baseline"));
  const Comparison reverse = compare_results(dir / "next.h5", dir / "base.h5", 1e-6);
  CHECK(reverse.worse.empty());
  CHECK(reverse.new_columns == std::vector<std::string>{"total_cosine"});
}
