// Results files: an HDF5 failure after opening (here a read whose type cannot convert) names
// the file, as the errors at opening do, so a user knows which of several files is at fault.
#include <catch2/catch.hpp>

#include "harness/results/h5_handles.hpp"
#include "harness/results/results_file.hpp"
#include "tests/support/temp_dir.hpp"

using namespace fp8lab;

TEST_CASE("results file: an HDF5 failure past opening names the file") {
  test::TempDir dir;
  const std::filesystem::path file = dir / "r.h5";
  {
    ResultsFile f = ResultsFile::create(file,
                                        {{"grid_index", ColumnDef::Type::i64, "1", "index"},
                                         {"point_key", ColumnDef::Type::str, "", "point"},
                                         {"status", ColumnDef::Type::str, "", "status"}},
                                        {{"study", "t"}});
    f.append({{"grid_index", std::int64_t{0}}, {"point_key", std::string("a=1")}, {"status", std::string("ok")}});
  }
  const ResultsFile f = ResultsFile::open(file, false);
  CHECK(f.read_str("status") == std::vector<std::string>{"ok"});
  // Strings do not convert to integers: H5Dread fails deep inside the read.
  CHECK_THROWS_WITH(f.read_i64("status"), Catch::StartsWith(file.string() + ": HDF5: H5Dread failed"));
  // Messages that already name the file are not prefixed twice.
  CHECK_THROWS_WITH(f.read_i64("nope"), file.string() + ": no column 'nope'");
}
