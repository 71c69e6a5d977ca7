// The training step under attention = flash (kernels/train/flash_attention.hpp) against the FP64
// reference (reference/llama_fp64_ref, which computes attention naively) and against the naive
// step; every deterministic policy bit-identical to flash's `none`; the saved bytes, the plan
// figures and the FLOP count that follow from the shapes.
#include <catch2/catch.hpp>
#include <cstring>
#include <random>

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
const std::vector<int>& stories_tokens() { return test::stories260k_tokens(); }

StepResult step(const ModelConfig& m, const LlamaWeights& w, const std::vector<int>& tokens, const std::string& recipe,
                AttentionKind attention, const std::string& policy = "none") {
  return test::run_step(m, w, tokens, named_recipe(recipe), attention, policy);
}
StepResult flash(const std::string& recipe, const std::string& policy = "none") {
  return step(config_of(stories()), stories(), stories_tokens(), recipe, AttentionKind::flash, policy);
}

StepReport shapes_only(const ModelConfig& m, std::int64_t T, AttentionKind attention, const std::string& policy, int eb = 2) {
  MemoryLedger ledger(nullptr);
  StepInput in{m, nullptr, {}, T, eb};
  in.attention = attention;
  return run_training_step(in, named_recipe("bf16"), make_policy(policy, m, T, eb, attention), ledger).report;
}

using test::bit_identical;

}  // namespace

TEST_CASE("train flash: recipe fp64 under flash reproduces the FP64 reference on stories260K with real tokens") {
  test::check_fp64_matches_reference(config_of(stories()), stories(), stories_tokens(), AttentionKind::flash);
}

TEST_CASE("train flash: recipe fp64 under flash reproduces the FP64 reference on a seeded small GQA model, 150 positions") {
  // 150 positions: three query and key blocks of 64, the last one partial.
  const ModelConfig m{"small_gqa", 32, 48, 2, 4, 2, 40};
  const LlamaWeights w = seeded_llama_weights(m, 7);
  std::mt19937 rng(3);
  std::vector<int> tokens;
  for (int i = 0; i < 150; ++i) tokens.push_back(static_cast<int>(rng() % static_cast<unsigned>(m.vocab)));
  test::check_fp64_matches_reference(m, w, tokens, AttentionKind::flash);
}

TEST_CASE("train flash: fp32 flash and fp32 naive agree within the FP32 bound, and are not the same computation") {
  const ReferenceStep ref = reference_step(stories(), stories_tokens());
  const StepResult f = flash("fp32"), n = step(config_of(stories()), stories(), stories_tokens(), "fp32", AttentionKind::naive);
  const double flash_vs_fp64 = gradient_errors(f.gradients, ref.gradients).total_rel_frobenius;
  const double naive_vs_fp64 = gradient_errors(n.gradients, ref.gradients).total_rel_frobenius;
  const double flash_vs_naive = gradient_errors(f.gradients, n.gradients).total_rel_frobenius;
  WARN("stories260K fp32, 64 tokens: flash vs FP64 " << flash_vs_fp64 << ", naive vs FP64 " << naive_vs_fp64
       << ", flash vs naive " << flash_vs_naive << "; loss " << f.report.loss << " / " << n.report.loss << " / " << ref.loss);
  // train_step_ref_test.cpp's FP32 bound, whose derivation (u = 2^-24 times sums a few hundred
  // long, through the same chain) holds for either attention: each is within 1e-4 of FP64, so by
  // the triangle inequality they are within 2e-4 of each other.
  CHECK(flash_vs_fp64 < 1e-4);
  CHECK(flash_vs_naive < 2e-4);
  CHECK(std::abs(f.report.loss - ref.loss) < 1e-4 * std::abs(ref.loss));
  // Different summation orders in FP32 cannot give the same bits everywhere: the field is honoured.
  CHECK(flash_vs_naive > 0);
}

TEST_CASE("train flash: deterministic recompute under flash gives gradients bit-identical to flash's none") {
  for (const char* recipe : {"fp32", "deepseek_v3"}) {
    const StepResult none = flash(recipe);
    for (const char* policy : {"full", "selective", "layers:0.4", "budget:0.5", "budget:0", "tensors:p=recompute",
                               "tensors:lse=recompute", "tensors:o=recompute", "tensors:q=recompute,v=recompute"}) {
      INFO(recipe << " / " << policy);
      CHECK(bit_identical(flash(recipe, policy), none));
    }
  }
  CHECK(bit_identical(flash("fp32", "slices:4"), flash("fp32")));
  // FP8 caching moves the gradients, under flash as under naive.
  const double moved = gradient_errors(flash("fp32", "deepseek").gradients, flash("fp32").gradients).total_rel_frobenius;
  CHECK(moved > 0);
  CHECK(moved < 0.0625);  // train_policy_test.cpp's bound for E4M3 caching under fp32
}

TEST_CASE("train flash: saved bytes drop by the probabilities and gain the log-sum-exp, exactly") {
  for (const char* name : {"stories260K", "llama3.1-8b"}) {
    const ModelConfig m = model_preset(name);
    const std::int64_t T = std::string(name) == "stories260K" ? 256 : 4096;
    const int eb = 2;
    const StepReport naive = shapes_only(m, T, AttentionKind::naive, "none", eb), fl = shapes_only(m, T, AttentionKind::flash, "none", eb);
    const auto probabilities = static_cast<std::size_t>(m.heads) * T * T * eb, lse = static_cast<std::size_t>(m.heads) * T * eb;
    REQUIRE(naive.saved_bytes_per_block.size() == fl.saved_bytes_per_block.size());
    for (std::size_t l = 0; l < fl.saved_bytes_per_block.size(); ++l)
      CHECK(fl.saved_bytes_per_block[l] == naive.saved_bytes_per_block[l] - probabilities + lse);
    CHECK(fl.saved_activation_bytes == naive.saved_activation_bytes - m.layers * (probabilities - lse));
    const double gib = 1024.0 * 1024.0 * 1024.0;
    WARN(name << ", " << T << " tokens, 16-bit: saved activations per block naive " << naive.saved_bytes_per_block[0] / gib
              << " GiB, flash " << fl.saved_bytes_per_block[0] / gib << " GiB; step peak naive " << naive.peak_bytes_total / gib
              << " GiB, flash " << fl.peak_bytes_total / gib << " GiB");
    CHECK(fl.peak_bytes_total < naive.peak_bytes_total);
  }
}

TEST_CASE("train flash: step FLOPs add backward's recompute of the probabilities; plan figures follow the shapes") {
  const ModelConfig m = config_of(stories());
  const double T = 64, pairs = m.heads * T * (T + 1) / 2, hs = m.head_size();
  const StepResult naive = step(m, stories(), stories_tokens(), "fp32", AttentionKind::naive), none = flash("fp32"),
                   full = flash("fp32", "full"), selective = flash("fp32", "selective");
  // Per block: q k^T again (2 hs per causal pair) and scale, subtract L, exp (3 per pair).
  CHECK(none.report.attention_recompute_flops == m.layers * (2 * pairs * hs + 3 * pairs));
  CHECK(naive.report.attention_recompute_flops == 0);
  CHECK(none.report.step_flops == naive.report.step_flops + none.report.attention_recompute_flops);
  CHECK(none.report.recompute_flops == 0);
  // full recomputes the same ops under either attention (flash's forward is the naive pair of ops' arithmetic).
  const StepResult naive_full = step(m, stories(), stories_tokens(), "fp32", AttentionKind::naive, "full");
  CHECK(full.report.recompute_flops == naive_full.report.recompute_flops);
  // selective has nothing to drop under flash: it is none.
  CHECK(selective.report.recompute_flops == 0);
  CHECK(selective.report.layers_recomputed_fraction == 0);
  CHECK(selective.report.activation_bytes_not_kept_fraction == 0);
  // full keeps x_in alone, of a flash block's 12 tensors (the lse heads x T in p's slot).
  const double D = m.dim, KV = m.kv_dim(), F = m.hidden, H = m.heads;
  const double block_elements = 6 * T * D + 2 * T * KV + 3 * T * F + H * T;
  CHECK(full.report.activation_bytes_not_kept_fraction == Approx(1 - T * D / block_elements).epsilon(1e-12));
}

TEST_CASE("train flash: a policy made for the other attention kind is refused") {
  const ModelConfig m = config_of(stories());
  HostAllocator host;
  MemoryLedger ledger(&host);
  StepInput in{m, &stories(), stories_tokens()};
  in.attention = AttentionKind::flash;
  CHECK_THROWS_WITH(run_training_step(in, named_recipe("fp32"), make_policy("full", m, 64, 4), ledger),
                    Catch::Contains("made for naive attention, the step runs flash"));
  CHECK_THROWS_WITH(parse_attention_kind("flash2"), "attention 'flash2' is not one of naive, flash");
  CHECK_THROWS_WITH(make_policy("tensors:lse=recompute", m, 64, 4), Catch::Contains("not a saved tensor"));
}
