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

// One point (axis layer = "x") with K = 4096 (eta ~ 1.2e-10) and the given metric values.
void write_results(const std::filesystem::path& file, const std::map<std::string, double>& metrics) {
  std::vector<ColumnDef> columns = {{"status", ColumnDef::Type::str, "", "status"},
                                    {"k", ColumnDef::Type::i64, "1", "K"},
                                    {"reference_rms", ColumnDef::Type::f64, "1", "RMS of the reference"}};
  for (const auto& [name, value] : metrics) columns.push_back({name, ColumnDef::Type::f64, "1", name});
  ResultsFile f = ResultsFile::create(file, {{"layer", "layer", AxisStorage::string, {"x"}, {}}}, columns,
                                      {{"study_name", "floors"}, {"study_kind", "gemm"}});
  Row row = {{"status", std::string("ok")}, {"k", kK}, {"reference_rms", kRms}};
  for (const auto& [name, value] : metrics) row[name] = value;
  f.write_point(0, row);
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
  CHECK_THAT(c.table(), Catch::Matches("(.|\n)*total_rel_frobenius +1e-07 +1.2e-07 +\\+20% +" + std::string(floor) + " +layer=x(.|\n)*"));

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

namespace {

// A 2 x 2 grid (accum x promotion) of one metric; `status` per point ("" = not run); shard i/n.
void write_grid(const std::filesystem::path& file, const std::vector<std::string>& promotions,
                const std::vector<std::string>& status, const std::string& shard = "0/1", double scale = 1.0) {
  const std::vector<GridAxis> axes = {{"accum", "accumulation", AxisStorage::string, {"hopper", "fp32"}, {}},
                                      {"promotion", "N_C", AxisStorage::promotion, promotions, {}}};
  ResultsFile f = ResultsFile::create(file, axes,
                                      {{"status", ColumnDef::Type::str, "", "status"},
                                       {"total_rel_frobenius", ColumnDef::Type::f64, "1", "error"},
                                       {"total_sqnr_db", ColumnDef::Type::f64, "dB", "SQNR"}},
                                      {{"study_name", "g"}, {"study_kind", "gemm"}, {"spec_sha256", "s"}, {"shard", shard}});
  for (std::int64_t p = 0; p < f.points(); ++p)
    if (!status[static_cast<std::size_t>(p)].empty())
      f.write_point(p, {{"status", status[static_cast<std::size_t>(p)]},
                        {"total_rel_frobenius", scale * 0.01 * static_cast<double>(p + 1)},
                        {"total_sqnr_db", 40.0 - 20.0 * std::log10(scale)}});
}

}  // namespace

TEST_CASE("report: groups by every varying axis by default; a subset names what it averaged over") {
  test::TempDir dir;
  write_grid(dir / "g.h5", {"128", "never"}, {"ok", "ok", "ok", "ok"});
  const std::string all = report_table(dir / "g.h5");
  INFO(all);
  CHECK_THAT(all, !Catch::Contains("AVERAGED"));
  CHECK_THAT(all, Catch::Matches("(.|\n)*\nfp32 +never +ok +0.04 +40(.|\n)*"));  // point (fp32, never): 4th
  const std::string by = report_table(dir / "g.h5", {"promotion"});
  INFO(by);
  CHECK_THAT(by, Catch::Contains("AVERAGED OVER accum (2 values)"));
  // promotion 128: points 1 and 3 (0.01, 0.03): mean 0.02.
  CHECK_THAT(by, Catch::Matches("(.|\n)*\n128 +2 +0.02 +0.01 +0.03(.|\n)*"));
  CHECK_THROWS_WITH(report_table(dir / "g.h5", {"layer"}), Catch::Contains("no axis 'layer'"));
}

TEST_CASE("compare: another grid is one error; points only in NEW are listed; dB changes in dB") {
  test::TempDir dir;
  write_grid(dir / "base.h5", {"128", "never"}, {"ok", "ok", "ok", "ok"});
  write_grid(dir / "other.h5", {"64", "never"}, {"ok", "ok", "ok", "ok"});
  CHECK_THROWS_WITH(compare_results(dir / "base.h5", dir / "other.h5", 1e-6),
                    Catch::Contains("axis 'promotion': the baseline's values 128 are not in NEW"));
  write_results(dir / "one.h5", noise_level());
  CHECK_THROWS_WITH(compare_results(dir / "base.h5", dir / "one.h5", 1e-6), Catch::Contains("different axes"));
  // NEW: a superset grid (an extra promotion value), every error doubled (SQNR down 6.02 dB).
  const std::vector<GridAxis> axes = {{"accum", "a", AxisStorage::string, {"hopper", "fp32"}, {}},
                                      {"promotion", "N_C", AxisStorage::promotion, {"128", "never", "32"}, {}}};
  {
    ResultsFile f = ResultsFile::create(dir / "more.h5", axes,
                                        {{"status", ColumnDef::Type::str, "", "status"},
                                         {"total_rel_frobenius", ColumnDef::Type::f64, "1", "error"},
                                         {"total_sqnr_db", ColumnDef::Type::f64, "dB", "SQNR"}},
                                        {{"study_kind", "gemm"}});
    for (std::int64_t p = 0; p < 6; ++p) {
      const std::int64_t base_index = (p / 3) * 2 + p % 3;  // the same point in the 2 x 2 baseline
      f.write_point(p, {{"status", std::string("ok")},
                        {"total_rel_frobenius", 2 * 0.01 * static_cast<double>(base_index + 1)},
                        {"total_sqnr_db", 40.0 - 20.0 * std::log10(2.0)}});
    }
  }
  const Comparison c = compare_results(dir / "base.h5", dir / "more.h5", 1e-6);
  INFO(c.table());
  CHECK(c.new_points == std::vector<std::string>{"accum=hopper promotion=32", "accum=fp32 promotion=32"});
  CHECK(c.worse.size() == 8);  // 4 points x 2 metrics
  CHECK_THAT(c.table(), Catch::Contains("-6.02 dB") && Catch::Contains("+100%"));
  CHECK(c.json["regression"] == true);
  CHECK(c.json["worse"][0]["change_unit"].is_string());
}

TEST_CASE("merge: refuses a missing, duplicated or incomplete shard unless allowed; a full set equals one run") {
  test::TempDir dir;
  write_grid(dir / "s0.h5", {"128", "never"}, {"ok", "", "ok", ""}, "0/2");
  write_grid(dir / "s1.h5", {"128", "never"}, {"", "ok", "", ""}, "1/2");  // its point 3 not run
  write_grid(dir / "s1full.h5", {"128", "never"}, {"", "ok", "", "ok"}, "1/2");
  CHECK_THROWS_WITH(merge_results(dir / "m.h5", {dir / "s0.h5"}), Catch::Contains("shard 1/2 is missing"));
  CHECK_THROWS_WITH(merge_results(dir / "m.h5", {dir / "s0.h5", dir / "s0.h5", dir / "s1full.h5"}),
                    Catch::Contains("duplicated"));
  CHECK_THROWS_WITH(merge_results(dir / "m.h5", {dir / "s0.h5", dir / "s1.h5"}),
                    Catch::Contains("is incomplete (1 of its points not run"));
  CHECK(!std::filesystem::exists(dir / "m.h5"));
  const MergeSummary partial = merge_results(dir / "p.h5", {dir / "s0.h5", dir / "s1.h5"}, /*allow_partial=*/true);
  CHECK(partial.points_done == 3);
  CHECK(ResultsFile::open(dir / "p.h5", false).root_attribute("complete") == "false");
  merge_results(dir / "m.h5", {dir / "s1full.h5", dir / "s0.h5"});
  write_grid(dir / "full.h5", {"128", "never"}, {"ok", "ok", "ok", "ok"});
  const ResultsFile merged = ResultsFile::open(dir / "m.h5", false), full = ResultsFile::open(dir / "full.h5", false);
  CHECK(merged.read_f64("total_rel_frobenius") == full.read_f64("total_rel_frobenius"));
  CHECK(merged.read_str("status") == full.read_str("status"));
  CHECK(merged.root_attribute("complete") == "true");
}
