// The scale_trajectory driver (harness/study/scale_trajectory) against the FP64 scaler references
// (reference/loss_scaler_ref) run on the same found-inf sequence; the engine's loss_scale input;
// plain SGD.
#include <catch2/catch.hpp>
#include <cmath>

#include "harness/metrics/train_step_errors.hpp"
#include "harness/study/scale_trajectory.hpp"
#include "harness/train/llama2c_weights.hpp"
#include "kernels/memory_ledger.hpp"
#include "kernels/train/model_weights.hpp"
#include "kernels/train/sgd.hpp"
#include "kernels/train/training_step.hpp"
#include "reference/loss_scaler_ref.hpp"

using namespace fp8lab;

namespace {

TrajectoryConfig too_large_start(const char* variant, std::int64_t interval) {
  TrajectoryConfig c;
  c.variant = variant;
  c.scaler = std::string(variant) == "megatron" ? LossScalerConfig::megatron() : LossScalerConfig::pytorch();
  c.scaler.initial_scale = 0x1p24;  // dlogits ~ S / 63 > 65504: FP16 overflows at step 0
  c.scaler.growth_interval = interval;
  if (std::string(variant) == "megatron") c.scaler.min_scale = 1.0;
  c.steps = 24;
  return c;
}

}  // namespace

TEST_CASE("scale trajectory: a scale too large for FP16 backs off until clean, then grows every interval (pytorch == reference)") {
  const Trajectory t = run_scale_trajectory(too_large_start("pytorch", 4));
  REQUIRE(t.found_inf.front() == 1.0);  // the case starts too large
  ref::PyTorchGradScalerRef ref(0x1p24, 2.0, 0.5, 4);
  std::int64_t clean_run = 0, growths = 0, first_clean = -1;
  for (std::size_t i = 0; i < t.scale.size(); ++i) {
    INFO("step " << i);
    CHECK(t.scale[i] == ref.scale());
    const bool inf = t.found_inf[i] != 0;
    CHECK(t.skipped[i] == (inf ? 1.0 : 0.0));
    if (!inf && first_clean < 0) first_clean = static_cast<std::int64_t>(i);
    // Independent of both implementations: a clean step after `interval` - 1 clean ones doubles
    // the scale for the next step; an overflow halves it.
    if (i + 1 < t.scale.size()) {
      clean_run = inf ? 0 : clean_run + 1;
      const double expected = inf ? t.scale[i] * 0.5 : clean_run == 4 ? t.scale[i] * 2.0 : t.scale[i];
      if (!inf && clean_run == 4) {
        clean_run = 0;
        ++growths;
      }
      CHECK(t.scale[i + 1] == expected);
    }
    ref.update(inf);
  }
  // Backed off: every step before the first clean one overflowed, each halving the scale.
  REQUIRE(first_clean > 0);
  CHECK(t.scale[static_cast<std::size_t>(first_clean)] == std::ldexp(1.0, 24 - static_cast<int>(first_clean)));
  CHECK(growths >= 1);  // grew within 24 steps
  for (double l : t.loss) CHECK(std::isfinite(l));
}

TEST_CASE("scale trajectory: megatron hysteresis trajectory == its reference on the same found-inf sequence") {
  const Trajectory t = run_scale_trajectory(too_large_start("megatron", 4));
  REQUIRE(t.found_inf.front() == 1.0);
  ref::MegatronGradScalerRef ref(0x1p24, 1.0, 2.0, 0.5, 4, 2);
  for (std::size_t i = 0; i < t.scale.size(); ++i) {
    INFO("step " << i);
    CHECK(t.scale[i] == ref.scale());
    CHECK(t.skipped[i] == t.found_inf[i]);  // every overflow skips, backoff or not
    ref.update(t.found_inf[i] != 0);
  }
  // Hysteresis 2: the first overflow keeps the scale.
  CHECK(t.scale[1] == 0x1p24);
}

TEST_CASE("scale trajectory: injected overflows are found and skip exactly those steps") {
  TrajectoryConfig c = too_large_start("pytorch", 1000);
  c.scaler.initial_scale = 256.0;  // clean for FP16 on this model (measured: no overflow here)
  c.steps = 12;
  c.overflow_every = 5;
  const Trajectory t = run_scale_trajectory(c);
  for (std::size_t i = 0; i < t.scale.size(); ++i) {
    INFO("step " << i);
    const bool injected = (i + 1) % 5 == 0;
    CHECK(t.found_inf[i] == (injected ? 1.0 : 0.0));
    CHECK(t.skipped[i] == t.found_inf[i]);
  }
  c.variant = "fp8_delayed";  // the inf is found and skipped there too; the FP8 scale is recorded
  const Trajectory d = run_scale_trajectory(c);
  CHECK(d.found_inf[4] == 1.0);
  CHECK(d.skipped[4] == 1.0);
  CHECK(d.scale[0] == 1.0);  // TE's delayed scaling starts at 1
  CHECK(d.scale[1] != 1.0);  // then follows the recorded tensor's amax
}

TEST_CASE("training step: loss_scale 2^10 multiplies every fp32 gradient by exactly 2^10") {
  // Backward is linear in dLoss/dlogits and a power-of-two factor commutes with FP32 rounding
  // (no value here is near FP32's subnormal or overflow range), so the gradients are bit-exact
  // multiples; a loss_scale applied anywhere else, or twice, breaks the equality.
  const LlamaWeights w = load_llama2c_checkpoint(find_data_file("stories260K/stories260K.bin"), kStories260kSha256);
  const train::ModelConfig m = train::config_of(w);
  const std::vector<int> tokens = stories260k_greedy_tokens(w, 32);
  HostAllocator host;
  MemoryLedger ledger(&host);
  const auto step = [&](double s) {
    train::StepInput in{m, &w, tokens};
    in.loss_scale = s;
    return train::run_training_step(in, train::named_recipe("fp32"), train::make_policy("none", m, 32, 4), ledger);
  };
  const train::StepResult a = step(1.0), b = step(1024.0);
  CHECK(a.report.loss == b.report.loss);
  for (std::size_t i = 0; i < a.gradients.size(); ++i)
    for (std::size_t k = 0; k < a.gradients[i].values.size(); ++k)
      if (a.gradients[i].values[k] * 1024.0 != b.gradients[i].values[k]) FAIL(a.gradients[i].name << "[" << k << "]");
  train::StepInput bad{m, &w, tokens};
  bad.loss_scale = 0.0;
  CHECK_THROWS_AS(train::run_training_step(bad, train::named_recipe("fp32"), train::make_policy("none", m, 32, 4), ledger),
                  std::invalid_argument);
}

TEST_CASE("sgd: w <- w - lr g on the named tensor only; unknown names and sizes are refused") {
  LlamaWeights w = load_llama2c_checkpoint(find_data_file("stories260K/stories260K.bin"), kStories260kSha256);
  const LlamaWeights before = w;
  const std::size_t per_layer = w.w2.size() / static_cast<std::size_t>(w.config.n_layers);
  std::vector<float> g(per_layer, 0.5f);
  train::sgd_step(w, "L1.w2", g, 0.25f);
  for (std::size_t i = 0; i < w.w2.size(); ++i) {
    const bool in_l1 = i >= per_layer && i < 2 * per_layer;
    if (w.w2[i] != (in_l1 ? before.w2[i] - 0.125f : before.w2[i])) FAIL("w2[" << i << "]");
  }
  CHECK(w.w1 == before.w1);
  CHECK_THROWS_AS(train::sgd_step(w, "L9.w2", g, 0.1f), std::invalid_argument);
  CHECK_THROWS_AS(train::sgd_step(w, "L1.wx", g, 0.1f), std::invalid_argument);
  CHECK_THROWS_AS(train::sgd_step(w, "L1.w1", std::vector<float>(3), 0.1f), std::invalid_argument);
}
