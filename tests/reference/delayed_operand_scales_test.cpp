// Delayed scaling in the training engine (kernels/train/delayed_operand_scales.hpp): operands
// quantized with the scale their history gave, against the FP64 references of the scale
// trajectory (reference/delayed_scaling_ref) and of the format (reference/float_formats_ref);
// the restore of a saved scaler; a training run under fp8_delayed resumed from a checkpoint
// draws the uninterrupted curve (the amax histories travel in the checkpoint).
#include <catch2/catch.hpp>
#include <unistd.h>
#include <cmath>
#include <random>

#include "harness/train/training_run.hpp"
#include "kernels/train/delayed_operand_scales.hpp"
#include "reference/delayed_scaling_ref.hpp"
#include "reference/float_formats_ref.hpp"
#include "tests/support/stories260k_fixture.hpp"

using namespace fp8lab;
using namespace fp8lab::train;

TEST_CASE("delayed operand scales: each step quantizes with the scale of the amaxes before it") {
  for (const Fp8Format format : {Fp8Format::e4m3, Fp8Format::e5m2}) {
    CAPTURE(format_name(format));
    const ref::FormatDefinition& def = format == Fp8Format::e4m3 ? ref::e4m3() : ref::e5m2();
    GemmPrecision p;
    p.kind = GemmPrecision::Kind::fp8;
    p.a_format = format;
    p.amax_history = 3;
    DelayedOperandScales scales;
    ref::DelayedScalingRef expected(def.max_finite, 3, /*reduce_max=*/true, /*margin=*/0);
    std::mt19937_64 rng(7);
    // Magnitudes that rise and fall over the steps, so that some steps clip (amax above the
    // history's) and some flush.
    for (const double magnitude : {1.0, 30.0, 5000.0, 0.01, 2.0, 2.0, 1e-5}) {
      std::normal_distribution<double> normal(0.0, magnitude);
      std::vector<float> x(200);
      for (float& v : x) v = static_cast<float>(normal(rng));
      DelayedOperand& op = scales.operand("L0.wq", GemmKind::fprop, 'a', p);
      const QuantizedTensor q = quantize_delayed(x, 10, 20, format, op);
      const auto scale = static_cast<float>(expected.scale());
      REQUIRE(op.scaler.scale() == scale);
      CHECK(q.scales[0] == static_cast<float>(1.0 / static_cast<double>(scale)));  // fl32(1 / scale), one rounding
      for (std::size_t i = 0; i < x.size(); ++i) {
        // q = satfinite(RNE(fl32(x * scale))): the product rounded to FP32 once, then to the format.
        const double scaled = static_cast<double>(static_cast<float>(static_cast<double>(x[i]) * scale));
        CHECK(q.codes[i] == ref::code_of_value(ref::round_to_format(scaled, def, /*saturate=*/true), def));
      }
      double amax = 0;
      for (const float v : x) amax = std::max(amax, std::fabs(static_cast<double>(v)));
      scales.roll();
      expected.update(amax);
    }
  }
}

TEST_CASE("delayed operand scales: a restored scaler continues the trajectory of the saved one") {
  DelayedScaler a({Fp8Format::e4m3, 4, AmaxReduction::max, 1});
  for (const float amax : {3.0f, 0.5f, 7.0f}) a.update(amax);
  DelayedScaler b(a.config(), a.history(), a.scale());
  for (const float amax : {0.25f, 0.25f, 0.25f, 0.25f, 9.0f}) {
    a.update(amax);
    b.update(amax);
    CHECK(a.scale() == b.scale());
    CHECK(a.history() == b.history());
  }
  CHECK_THROWS_WITH(DelayedScaler(a.config(), std::vector<float>(3), 1.0f), Catch::Contains("field 'history'"));
  CHECK_THROWS_WITH(DelayedScaler(a.config(), a.history(), 0.0f), Catch::Contains("field 'scale'"));
}

TEST_CASE("delayed operand scales: an fp8_delayed run resumed from a checkpoint draws the uninterrupted curve") {
  const TokenStream stream = test::stories260k_token_stream();
  TrainingRunConfig c;
  c.recipe = named_recipe("fp8_delayed");
  c.batch = 2;
  c.seq_len = 8;
  c.steps = c.schedule.steps = 4;
  c.schedule.lr = 3e-3;
  const TrainingRunResult straight = run_training(c, test::stories260k_weights(), stream, nullptr);
  const auto file = std::filesystem::temp_directory_path() / ("fp8lab_delayed_resume_" + std::to_string(::getpid()) + ".ckpt");
  Checkpointing first;
  first.file = file;
  first.stop_requested = [] { return true; };
  run_training(c, test::stories260k_weights(), stream, nullptr, {}, first);
  const RunCheckpoint saved = read_checkpoint(file);
  CHECK(saved.delayed.size() == static_cast<std::size_t>(6 * 7 * test::stories260k_weights().config.n_layers));
  // After step 0 every operand's history holds that operand's amax of the step: non-zero.
  for (const DelayedOperandState& d : saved.delayed) {
    CAPTURE(d.key);
    CHECK(d.history[0] > 0);
    CHECK(d.scale != 1.0f);
  }
  Checkpointing second;
  second.resume_from = &saved;
  const TrainingRunResult resumed = run_training(c, test::stories260k_weights(), stream, nullptr, {}, second);
  REQUIRE(resumed.steps.size() == straight.steps.size());
  for (std::size_t s = 0; s < straight.steps.size(); ++s) CHECK(resumed.steps[s].train_loss == straight.steps[s].train_loss);
  CHECK(resumed.final_weights.wq == straight.final_weights.wq);
  // The recipe differs from per-tensor current scaling (hybrid) from the second step on.
  TrainingRunConfig current = c;
  current.recipe = named_recipe("hybrid");
  const TrainingRunResult hybrid = run_training(current, test::stories260k_weights(), stream, nullptr);
  CHECK(hybrid.steps[1].train_loss != straight.steps[1].train_loss);
  std::filesystem::remove(file);
}
