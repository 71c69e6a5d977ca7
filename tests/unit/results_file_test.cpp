// Results files as grids: every point of the grid exists from creation at its fill value, a
// written point reads back at its grid position (last axis fastest), numeric axes stay numbers
// ("never" promotion is the documented 0), a column may carry an extra trailing dimension,
// and an HDF5 failure after opening names the file.
#include <catch2/catch.hpp>
#include <cmath>

#include "harness/results/h5_handles.hpp"
#include "harness/results/results_file.hpp"
#include "tests/support/temp_dir.hpp"

using namespace fp8lab;

namespace {

std::vector<GridAxis> small_axes() {
  return {{"layer", "layer", AxisStorage::string, {"a", "b"}, {}},
          {"promotion", "N_C", AxisStorage::promotion, {"32", "never", "128"}, {}}};
}

std::vector<ColumnDef> small_columns() {
  using T = ColumnDef::Type;
  ExtraDimension steps{"step", "training step", "1", {0, 10, 20, 30}, {}};
  return {{"status", T::str, "", "status"},
          {"k", T::i64, "1", "K"},
          {"error", T::f64, "1", "an error"},
          {"error_per_step", T::f64, "1", "an error per step", steps}};
}

}  // namespace

TEST_CASE("results file: the grid exists from creation, points land at their grid position") {
  test::TempDir dir;
  const std::filesystem::path file = dir / "r.h5";
  {
    ResultsFile f = ResultsFile::create(file, small_axes(), small_columns(), {{"study_name", "t"}},
                                        {{"points_total", 6}, {"points_done", 0}});
    CHECK(f.points() == 6);
    // Point (layer b, promotion never) is index 1 * 3 + 1 = 4.
    CHECK(f.point_values(4) == std::vector<std::string>{"b", "never"});
    f.write_point(4, {{"status", std::string("ok")}, {"k", std::int64_t{256}}, {"error", 0.25},
                      {"error_per_step", std::vector<double>{1, 2, 3, 4}}},
                  {{"points_done", 1}});
    // A row lacking a column, or a vector of the wrong length, writes nothing.
    CHECK_THROWS_WITH(f.write_point(0, {{"status", std::string("ok")}}), Catch::Contains("lacks column"));
    CHECK_THROWS_WITH(f.write_point(0, {{"status", std::string("ok")}, {"k", std::int64_t{1}}, {"error", 1.0},
                                        {"error_per_step", std::vector<double>{1, 2}}}),
                      Catch::Contains("'error_per_step' has the wrong type or length"));
  }
  const ResultsFile f = ResultsFile::open(file, false);
  REQUIRE(f.axes().size() == 2);
  CHECK(f.axes()[0].name == "layer");
  CHECK(f.axes()[1].values == std::vector<std::string>{"32", "never", "128"});  // read back from int64 0
  CHECK(f.axes()[1].storage == AxisStorage::promotion);
  CHECK(f.root_counter("points_done") == 1);
  CHECK(f.root_attribute("study_name") == "t");
  const std::vector<std::string> status = f.read_str("status");
  CHECK(status == std::vector<std::string>{"", "", "", "", "ok", ""});
  const std::vector<std::int64_t> k = f.read_i64("k");
  CHECK(k[4] == 256);
  CHECK(k[0] == kMissingInteger);  // the fill value of a point not run
  const std::vector<double> e = f.read_f64("error");
  CHECK(e[4] == 0.25);
  CHECK(std::isnan(e[3]));
  const std::vector<double> steps = f.read_f64("error_per_step");
  REQUIRE(steps.size() == 24);
  CHECK(std::vector<double>(steps.begin() + 16, steps.begin() + 20) == std::vector<double>{1, 2, 3, 4});
  REQUIRE(f.columns().back().extra.has_value());
  CHECK(f.columns().back().extra->numbers == std::vector<std::int64_t>{0, 10, 20, 30});
  const Row back = f.read_point(4);
  CHECK(std::get<double>(back.at("error")) == 0.25);
  CHECK(std::get<std::vector<double>>(back.at("error_per_step"))[3] == 4.0);
}

TEST_CASE("results file: an integer axis refuses a value that is not one, and 0 as a promotion interval") {
  test::TempDir dir;
  std::vector<GridAxis> axes = {{"seed", "seed", AxisStorage::integer, {"1", "x"}, {}}};
  CHECK_THROWS_WITH(ResultsFile::create(dir / "a.h5", axes, small_columns(), {}), Catch::Contains("'x' is not an integer"));
  axes = {{"promotion", "N_C", AxisStorage::promotion, {"0"}, {}}};
  CHECK_THROWS_WITH(ResultsFile::create(dir / "b.h5", axes, small_columns(), {}), Catch::Contains("sentinel"));
}

TEST_CASE("results file: an HDF5 failure past opening names the file") {
  test::TempDir dir;
  const std::filesystem::path file = dir / "r.h5";
  {
    ResultsFile f = ResultsFile::create(file, small_axes(), {{"status", ColumnDef::Type::str, "", "status"}}, {{"study", "t"}});
    f.write_point(0, {{"status", std::string("ok")}});
  }
  const ResultsFile f = ResultsFile::open(file, false);
  CHECK(f.read_str("status")[0] == "ok");
  // Strings do not convert to integers: H5Dread fails deep inside the read.
  CHECK_THROWS_WITH(f.read_i64("status"), Catch::StartsWith(file.string() + ": HDF5: H5Dread failed"));
  // Messages that already name the file are not prefixed twice.
  CHECK_THROWS_WITH(f.read_i64("nope"), file.string() + ": no column 'nope'");
}
