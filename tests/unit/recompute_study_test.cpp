// Study kind "recompute" (harness/study/recompute_study.cpp) through the StudyKind interface:
// a small grid evaluates to the engine's numbers, and bad specs are SpecErrors (exit 2)
// naming the file and the field.
#include <catch2/catch.hpp>
#include <cmath>

#include "harness/study/grid.hpp"
#include "harness/study/study_kind.hpp"

using namespace fp8lab;

namespace {

struct Loaded {
  StudySpec spec;
  std::unique_ptr<StudyKind> kind;
  std::vector<Point> points;
};

Loaded load(const std::string& axes_and_settings) {
  Loaded l;
  l.spec = parse_study_spec("[study]\nname = 'r'\nkind = 'recompute'\n" + axes_and_settings,
                            std::string(FP8LAB_TEST_SOURCE_DIR) + "/experiments/spec.toml");
  l.kind = make_study_kind("recompute");
  l.kind->configure(l.spec);
  l.points = expand_grid(l.spec, *l.kind);
  l.kind->check_grid(l.spec, l.points);
  l.spec.check_unknown_keys();
  return l;
}

std::string refusal(const std::string& text) {
  try {
    load(text);
  } catch (const SpecError& e) {
    return e.what();
  }
  return "accepted";
}

double number(const Row& row, const std::string& column) { return std::get<double>(row.at(column)); }

}  // namespace

TEST_CASE("recompute study: stories260K points measure memory, FLOPs and gradient errors") {
  Loaded l = load("[axes]\npolicy = ['none', 'full', 'deepseek']\nrecipe = ['fp32', 'recipes/deepseek_v3.toml']\ntokens = [32]\n");
  REQUIRE(l.points.size() == 6);
  std::map<std::string, Row> rows;
  for (const Point& p : l.points) rows[p.at("policy") + "/" + p.at("recipe")] = l.kind->evaluate(p, {});
  const Row& none = rows["none/fp32"];
  const Row& full = rows["full/fp32"];
  CHECK(number(none, "recompute_flops_fraction") == 0);
  CHECK(number(full, "layers_fully_recomputed_fraction") == 1);
  CHECK(number(full, "saved_activation_bytes") < number(none, "saved_activation_bytes"));
  CHECK(number(full, "peak_bytes_recompute_workspace") > 0);
  CHECK(number(none, "peak_bytes_recompute_workspace") == 0);
  CHECK(number(full, "grad_rel_frobenius_vs_none") == 0);  // deterministic recompute: bit-identical
  CHECK(number(rows["deepseek/fp32"], "grad_rel_frobenius_vs_none") > 0);
  CHECK(number(none, "grad_rel_frobenius") < 1e-4);
  CHECK(number(rows["none/recipes/deepseek_v3.toml"], "grad_rel_frobenius") > number(none, "grad_rel_frobenius"));
  CHECK(std::isfinite(number(none, "grad_rel_frobenius_L4")));
  CHECK(number(none, "loss") > 0);
}

TEST_CASE("recompute study: public models run shapes-only") {
  Loaded l = load("[axes]\nmodel = ['llama3.1-8b']\npolicy = ['none', 'full']\ntokens = [4096]\n");
  const Row none = l.kind->evaluate(l.points[0], {}), full = l.kind->evaluate(l.points[1], {});
  CHECK(number(none, "saved_activation_bytes") > 40e9);
  CHECK(std::isnan(number(none, "loss")));
  CHECK(number(full, "peak_bytes_total") < number(none, "peak_bytes_total"));
}

TEST_CASE("recompute study: bad specs name the file and the field") {
  using Catch::Contains;
  CHECK_THAT(refusal("[axes]\npolicy = ['budget:1.5']\n"), Contains("spec.toml:5:"));
  CHECK_THAT(refusal("[axes]\npolicy = ['budget:1.5']\n"), Contains("outside [0, 1]"));
  CHECK_THAT(refusal("[axes]\npolicy = ['sometimes']\n"), Contains("expected none, full"));
  CHECK_THAT(refusal("[axes]\npolicy = ['slices:5']\ntokens = [64]\n"), Contains("field 'axes.policy'"));
  CHECK_THAT(refusal("[axes]\nmodel = ['llama3.1-8b']\n[step]\nmetrics = 'loss'\n"),
             Contains("field 'step.metrics': 'loss' needs an allocating run"));
  CHECK_THAT(refusal("[axes]\nrecipe = ['recipes/missing.toml']\n"), Contains("recipes/missing.toml"));
  CHECK_THAT(refusal("[step]\ncolour = 1\n"), Contains("step.colour"));
  CHECK_THAT(refusal("[axes]\nrecipe = ['fp7']\n"), Contains("recipe 'fp7' is not one of"));
}
