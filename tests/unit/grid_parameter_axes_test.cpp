// Parameter axes (harness/study/grid.hpp): an axis that applies to some values of another is
// folded into that axis's dimension, so the grid holds only cells that mean something. The
// expected grids below are written out by hand from the rule, not produced by the code.
#include <catch2/catch.hpp>

#include "harness/study/grid.hpp"
#include "harness/study/study_kind.hpp"

using namespace fp8lab;

namespace {

// A kind with axes source (a real tensor or "synth"), p and q (parameters of "synth" only) and x.
class ParameterKind final : public StudyKind {
 public:
  explicit ParameterKind(AxisStorage parameter_storage = AxisStorage::integer, std::string owner = "source")
      : storage_(parameter_storage), owner_(std::move(owner)) {}
  std::string name() const override { return "parameters"; }
  std::vector<AxisDef> axes() const override {
    return {{"source", {"synth"}, "source"},
            {"p", {"1"}, "p", storage_, ParameterOf{owner_, {"synth"}}},
            {"q", {"7"}, "q", storage_, ParameterOf{owner_, {"synth"}}},
            {"x", {"0"}, "x", AxisStorage::integer}};
  }
  void validate_value(const std::string&, const std::string&) const override {}
  void configure(const StudySpec&) override {}
  void check_grid(const StudySpec&, const std::vector<Point>&) const override {}
  std::optional<std::string> skip_reason(const Point&, const Backend&) const override { return std::nullopt; }
  std::vector<ColumnDef> result_columns() const override { return {}; }
  Row evaluate(const Point&, const RunContext&) override { return {}; }
  Row skipped_row(const Point&) const override { return {}; }
  std::string operand_description() const override { return ""; }

 private:
  AxisStorage storage_;
  std::string owner_;
};

StudySpec spec_with(const std::string& axes) {
  return parse_study_spec("[study]\nname = 'g'\nkind = 'parameters'\n[axes]\n" + axes, "grid.toml");
}

std::vector<std::string> keys(const std::vector<Point>& points) {
  std::vector<std::string> k;
  for (const Point& p : points) k.push_back(p.key());
  return k;
}

}  // namespace

TEST_CASE("parameter axes: the owner's dimension holds each plain value once and one entry per parameter combination") {
  const StudySpec spec = spec_with("source = ['a', 'synth', 'b']\np = [1, 2]\nq = [7, 8]\nx = [0, 5]\n");
  const ParameterKind kind;
  const std::vector<GridDimension> dims = grid_dimensions(spec, kind);
  REQUIRE(dims.size() == 2);  // source (with p and q folded in) and x
  std::vector<std::string> labels;
  for (const GridEntry& e : dims[0].entries) labels.push_back(e.label);
  CHECK(labels == std::vector<std::string>{"a", "synth[p=1,q=7]", "synth[p=1,q=8]", "synth[p=2,q=7]", "synth[p=2,q=8]", "b"});
  CHECK(dims[1].entries.size() == 2);
  // 6 entries x 2 values of x, not 3 x 2 x 2 x 2 = 24 cells of which 16 repeat a or b.
  const std::vector<Point> points = expand_grid(spec, kind);
  CHECK(keys(points) == std::vector<std::string>{
                            "source=a;x=0", "source=a;x=5",
                            "source=synth;p=1;q=7;x=0", "source=synth;p=1;q=7;x=5",
                            "source=synth;p=1;q=8;x=0", "source=synth;p=1;q=8;x=5",
                            "source=synth;p=2;q=7;x=0", "source=synth;p=2;q=7;x=5",
                            "source=synth;p=2;q=8;x=0", "source=synth;p=2;q=8;x=5",
                            "source=b;x=0", "source=b;x=5"});
  CHECK_THROWS_AS(points[0].at("p"), std::logic_error);  // a parameter has no value where it does not apply
  CHECK(points[4].at("q") == "8");
}

TEST_CASE("parameter axes: without the value they apply to, they add nothing") {
  const std::vector<Point> points = expand_grid(spec_with("source = ['a']\np = [1, 2, 3]\n"), ParameterKind());
  CHECK(keys(points) == std::vector<std::string>{"source=a;x=0"});
}

TEST_CASE("parameter axes: a kind that declares one wrongly is a logic error") {
  const StudySpec spec = spec_with("source = ['synth']\n");
  CHECK_THROWS_AS(grid_dimensions(spec, ParameterKind(AxisStorage::string)), std::logic_error);
  CHECK_THROWS_AS(grid_dimensions(spec, ParameterKind(AxisStorage::integer, "nope")), std::logic_error);
}
