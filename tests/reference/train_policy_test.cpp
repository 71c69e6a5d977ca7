// Activation policies of the training step: every policy that only recomputes
// deterministic ops gives gradients bit-identical to `none` with the same recipe; FP8
// caching (deepseek) and K-sliced FP8 Wgrads (slices under an FP8 recipe) differ, and the
// difference is measured. The reported fractions follow from the shapes.
#include <catch2/catch.hpp>
#include <cstring>

#include "harness/metrics/train_step_errors.hpp"
#include "kernels/train/flop_count.hpp"
#include "kernels/train/model_weights.hpp"
#include "kernels/train/training_step.hpp"
#include "tests/support/stories260k_fixture.hpp"
#include "tests/support/train_step_checks.hpp"

using namespace fp8lab;
using namespace fp8lab::train;

namespace {

const LlamaWeights& stories() { return test::stories260k_weights(); }
const std::vector<int>& tokens() { return test::stories260k_tokens(); }

StepResult step(const std::string& recipe, const std::string& policy) {
  return test::run_step(config_of(stories()), stories(), tokens(), named_recipe(recipe), AttentionKind::naive, policy);
}

using test::bit_identical;

}  // namespace

TEST_CASE("train policies: deterministic recompute gives gradients bit-identical to none") {
  for (const char* recipe : {"fp32", "deepseek_v3", "bf16"}) {
    const StepResult none = step(recipe, "none");
    for (const char* policy : {"full", "selective", "layers:0.4", "budget:0.5", "budget:0", "tensors:q=recompute,g=recompute"}) {
      INFO(recipe << " / " << policy);
      CHECK(bit_identical(step(recipe, policy), none));
    }
  }
  // Slicing the positions splits the Wgrads' K; the non-FP8 GEMMs carry each sum across
  // slices (linear_gemm.hpp), so their bits do not change.
  for (const char* recipe : {"fp32", "bf16", "fp64"}) {
    INFO(recipe << " / slices:4");
    CHECK(bit_identical(step(recipe, "slices:4"), step(recipe, "none")));
  }
}

TEST_CASE("train policies: FP8 caching and FP8 slicing differ from none, by a measured amount") {
  const ReferenceStep ref = reference_step(stories(), tokens());
  for (const char* recipe : {"fp32", "deepseek_v3"}) {
    const StepResult none = step(recipe, "none"), cached = step(recipe, "deepseek");
    const double vs_none = gradient_errors(cached.gradients, none.gradients).total_rel_frobenius;
    const double none_vs_fp64 = gradient_errors(none.gradients, ref.gradients).total_rel_frobenius;
    const double cached_vs_fp64 = gradient_errors(cached.gradients, ref.gradients).total_rel_frobenius;
    WARN(recipe << ": FP8 caching (deepseek policy) changes the gradients by " << vs_none << " (rel. Frobenius vs none); vs FP64 "
                << cached_vs_fp64 << " instead of " << none_vs_fp64);
    CHECK(vs_none > 0);
    // Under fp32 (otherwise ~exact next to it): an E4M3 value with a per-1x128 scale is within
    // 2^-4 relative of its input (half an ulp of 3 mantissa bits), so the cached activations,
    // and the gradients linear in them, move by under 2^-4 in relative Frobenius norm. Under
    // an FP8 recipe the cached value is quantized again by the GEMMs and the two FP8 results
    // differ by up to the sum of their own errors (measured: 0.07 against 0.18 vs FP64).
    if (std::string(recipe) == "fp32") CHECK(vs_none < 0.0625);
  }
  // A custom per-tensor policy caching only o in FP8 sits between none and deepseek.
  {
    const StepResult none = step("fp32", "none"), o_only = step("fp32", "tensors:o=fp8"), deepseek = step("fp32", "deepseek");
    const double o_diff = gradient_errors(o_only.gradients, none.gradients).total_rel_frobenius;
    CHECK(o_diff > 0);
    CHECK(o_diff < gradient_errors(deepseek.gradients, none.gradients).total_rel_frobenius);
  }
  const StepResult none = step("deepseek_v3", "none"), sliced = step("deepseek_v3", "slices:4");
  const double vs_none = gradient_errors(sliced.gradients, none.gradients).total_rel_frobenius;
  WARN("deepseek_v3: slices:4 (FP8 Wgrads with K split in 4, each quantized and promoted on its own) changes the gradients by "
       << vs_none);
  CHECK(vs_none > 0);
}

TEST_CASE("train policies: reported fractions follow from the shapes") {
  const ModelConfig m = config_of(stories());
  const double T = 64, D = m.dim, KV = m.kv_dim(), F = m.hidden, H = m.heads;
  const double block_elements = 6 * T * D + 2 * T * KV + 3 * T * F + H * T * T;  // layer_graph.hpp's 12 tensors
  const StepResult none = step("fp32", "none"), full = step("fp32", "full"), selective = step("fp32", "selective"),
                   half = step("fp32", "layers:0.4");
  CHECK(none.report.recompute_flops == 0);
  CHECK(none.report.activation_bytes_not_kept_fraction == 0);
  CHECK(full.report.layers_recomputed_fraction == 1);
  CHECK(full.report.layers_fully_recomputed_fraction == 1);
  CHECK(full.report.activation_bytes_not_kept_fraction == Approx(1 - T * D / block_elements).epsilon(1e-12));
  CHECK(full.report.recompute_flops == Approx(m.layers * (flops::block_forward(m, T) - flops::gemm(T, D, F) - T * D)).epsilon(1e-12));
  CHECK(half.report.layers_fully_recomputed_fraction == 0.4);  // round(0.4 * 5) = 2 blocks
  CHECK(selective.report.layers_fully_recomputed_fraction == 0);
  CHECK(selective.report.layers_recomputed_fraction == 1);
  CHECK(selective.report.recompute_flops == Approx(m.layers * producer_flops(Saved::p, m, 64)).epsilon(1e-12));
  CHECK(selective.report.activation_bytes_not_kept_fraction == Approx(H * T * T / block_elements).epsilon(1e-12));
  WARN("stories260K, 64 tokens: recompute_flops_fraction full " << full.report.recompute_flops_fraction << ", selective "
       << selective.report.recompute_flops_fraction << "; bytes not kept full " << full.report.activation_bytes_not_kept_fraction
       << ", selective " << selective.report.activation_bytes_not_kept_fraction);
  // budget:f keeps at most f of the bytes whenever f is at least `full`'s share.
  for (double f : {0.9, 0.5, 0.3}) {
    const StepResult b = step("fp32", "budget:" + std::to_string(f).substr(0, 3));
    INFO("budget " << f);
    CHECK(1 - b.report.activation_bytes_not_kept_fraction <= f + 1e-12);
  }
}

TEST_CASE("train policies: bad specs are refused with the reason") {
  const ModelConfig m = config_of(stories());
  const auto refuses = [&](const std::string& spec, const std::string& why) {
    try {
      make_policy(spec, m, 64, 4);
      FAIL("accepted " << spec);
    } catch (const std::invalid_argument& e) {
      CHECK_THAT(e.what(), Catch::Contains(why));
    }
  };
  refuses("sometimes", "expected none, full");
  refuses("layers:1.5", "outside [0, 1]");
  refuses("budget:-0.1", "outside [0, 1]");
  refuses("budget:half", "not a number");
  refuses("slices:5", "positive divisor of the 64");
  refuses("slices:0", "positive divisor");
  refuses("full:1", "expected none, full");
  refuses("tensors:x_in=recompute", "not a saved tensor");
  refuses("tensors:p=sometimes", "not one of keep, fp8, recompute");
}
