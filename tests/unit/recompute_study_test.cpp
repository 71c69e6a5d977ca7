// Study kind "recompute" (harness/study/recompute_study.cpp) through the StudyKind interface:
// a small grid evaluates to the engine's numbers, and bad specs are SpecErrors (exit 2)
// naming the file and the field.
#include <catch2/catch.hpp>
#include <cmath>

#include "harness/metrics/train_step_errors.hpp"
#include "harness/study/grid.hpp"
#include "harness/study/study_kind.hpp"
#include "harness/train/llama2c_weights.hpp"
#include "kernels/cpu/cpu_backend.hpp"

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
const std::vector<double>& array(const Row& row, const std::string& column) {
  return std::get<std::vector<double>>(row.at(column));
}
const ColumnDef& column(const StudyKind& kind, const std::string& name) {
  static std::vector<ColumnDef> columns;
  columns = kind.result_columns();
  for (const ColumnDef& c : columns)
    if (c.name == name) return c;
  FAIL("no column " << name);
  throw;
}
double sum_of_squares(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x * x;
  return s;
}

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
  CHECK(number(none, "loss") > 0);
}

// The per-block and per-weight arrays against the all-weights figure: ||E||^2 is the sum of
// the blocks' ||E_l||^2 and the non-block tensors' (embedding, rms_final), and also the sum
// over weight kinds, where ||E_x|| = rel_x ||R_x|| with ||R_x|| summed here from the FP64
// reference's gradients (not through the metrics module). Each rel is a ratio of two
// FP64 norms of at most ~1e5 terms, so relative rounding of order 1e5 * 2^-53 ~ 1e-11 at
// worst; 1e-9 leaves room and still fails on any dropped or misplaced tensor (each block
// carries > 1% of the total squared error here).
TEST_CASE("recompute study: per-block and per-weight arrays add up to the all-weights error") {
  Loaded l = load("[axes]\npolicy = ['none']\nrecipe = ['recipes/deepseek_v3.toml']\ntokens = [32]\n");
  const Row row = l.kind->evaluate(l.points.at(0), {});
  const LlamaWeights weights =
      load_llama2c_checkpoint(find_data_file("stories260K/stories260K.bin"), kStories260kSha256);
  const ReferenceStep reference = reference_step(weights, stories260k_greedy_tokens(weights, 32));
  std::map<std::string, double> block_ref2, kind_ref2;
  double total_ref2 = 0;
  for (const auto& g : reference.gradients) {
    const double s = sum_of_squares(g.values);
    total_ref2 += s;
    const bool in_block = g.name[0] == 'L';
    block_ref2[in_block ? g.name.substr(0, g.name.find('.')) : g.name] += s;
    kind_ref2[in_block ? g.name.substr(g.name.find('.') + 1) : g.name] += s;
  }
  const std::vector<double>& per_block = array(row, "grad_rel_frobenius_per_block");
  const std::vector<double>& per_weight = array(row, "grad_rel_frobenius_per_weight");
  REQUIRE(per_block.size() == 5);  // the block dimension spans stories260K's 5 layers
  const ColumnDef& weight_column = column(*l.kind, "grad_rel_frobenius_per_weight");
  REQUIRE(weight_column.extra->labels.size() == per_weight.size());
  const auto& kinds = weight_column.extra->labels;
  auto weight_rel = [&](const std::string& kind) {
    return per_weight[static_cast<std::size_t>(std::find(kinds.begin(), kinds.end(), kind) - kinds.begin())];
  };
  double by_block2 = 0, by_kind2 = 0;
  for (int b = 0; b < 5; ++b) by_block2 += std::pow(per_block[static_cast<std::size_t>(b)], 2) * block_ref2.at("L" + std::to_string(b));
  for (const char* outside : {"embedding", "rms_final"}) by_block2 += std::pow(weight_rel(outside), 2) * block_ref2.at(outside);
  for (const auto& [kind, ref2] : kind_ref2) by_kind2 += std::pow(weight_rel(kind), 2) * ref2;
  const double total = number(row, "grad_rel_frobenius");
  REQUIRE(total > 0.01);  // an FP8 recipe: a real error to add up
  CHECK(std::sqrt(by_block2 / total_ref2) == Approx(total).epsilon(1e-9));
  CHECK(std::sqrt(by_kind2 / total_ref2) == Approx(total).epsilon(1e-9));
}

TEST_CASE("recompute study: the block dimension spans the largest model, smaller ones are NaN beyond their layers") {
  Loaded l = load("[axes]\nmodel = ['stories260K', 'llama3.1-8b']\npolicy = ['none']\ntokens = [32]\n");
  REQUIRE(column(*l.kind, "grad_rel_frobenius_per_block").extra->size() == 32);
  const Row small = l.kind->evaluate(l.points.at(0), {}), large = l.kind->evaluate(l.points.at(1), {});
  const std::vector<double>& g = array(small, "grad_rel_frobenius_per_block");
  const std::vector<double>& bytes = array(small, "saved_activation_bytes_per_block");
  for (std::size_t b = 0; b < 32; ++b) {
    CHECK(std::isfinite(g[b]) == (b < 5));
    CHECK(std::isfinite(bytes[b]) == (b < 5));
    CHECK(std::isfinite(array(large, "saved_activation_bytes_per_block")[b]));
    CHECK(std::isnan(array(large, "grad_rel_frobenius_per_block")[b]));  // shapes-only: nothing computed
  }
}

TEST_CASE("recompute study: invalid combinations are skipped with the reason") {
  using Catch::Contains;
  Loaded l = load("[axes]\npolicy = ['none', 'deepseek', 'full']\ncache = ['policy', 'compute', 'fp8']\ntokens = [64, 1024]\n");
  const std::unique_ptr<Backend> cpu = cpu::make_cpu_backend();
  std::map<std::string, std::string> reasons;
  for (const Point& p : l.points)
    reasons[p.at("policy") + "/" + p.at("cache") + "/" + p.at("tokens")] = l.kind->skip_reason(p, *cpu).value_or("runs");
  CHECK_THAT(reasons["none/policy/1024"], Contains("512 positions"));
  CHECK_THAT(reasons["none/compute/64"], Contains("caches nothing in FP8"));
  CHECK_THAT(reasons["full/fp8/64"], Contains("keeps no linear-layer input"));
  CHECK(reasons["deepseek/compute/64"] == "runs");  // deepseek's FP8 caching turned off
  CHECK(reasons["none/fp8/64"] == "runs");
  CHECK(reasons["none/policy/64"] == "runs");
}

TEST_CASE("recompute study: cache=compute removes deepseek's FP8 caching error, cache=fp8 adds one to none") {
  Loaded l = load("[axes]\npolicy = ['none', 'deepseek']\ncache = ['compute', 'fp8']\ntokens = [32]\n");
  std::map<std::string, Row> rows;
  for (const Point& p : l.points)
    if (!(p.at("policy") == "none" && p.at("cache") == "compute")) rows[p.at("policy") + "/" + p.at("cache")] = l.kind->evaluate(p, {});
  CHECK(number(rows["deepseek/compute"], "grad_rel_frobenius_vs_none") == 0);  // only deterministic recompute left
  CHECK(number(rows["none/fp8"], "grad_rel_frobenius_vs_none") > 1e-3);
  CHECK(number(rows["none/fp8"], "saved_activation_bytes") < number(rows["deepseek/compute"], "saved_activation_bytes") * 2);
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
  CHECK_THAT(refusal("[axes]\ncache = ['bf8']\n"), Contains("cache 'bf8' is not one of policy, compute, fp8"));
}
