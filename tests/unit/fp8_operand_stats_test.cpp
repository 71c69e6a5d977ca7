// FP8 operand statistics (kernels/train/fp8_operand_stats.hpp): the tally of a hand-made operand
// against its definitions, and the engine's tallies under the DeepSeek-V3 recipe: one entry per
// FP8 GEMM, element counts equal to the operands' sizes, the Fprop A tally equal to quantizing
// W independently, and a step whose statistics are collected computing the very same bits.
#include <catch2/catch.hpp>
#include <cmath>

#include "kernels/cpu/quantize.hpp"
#include "kernels/formats/float_formats.hpp"
#include "kernels/memory_ledger.hpp"
#include "kernels/train/fp8_operand_stats.hpp"
#include "kernels/train/model_weights.hpp"
#include "kernels/train/training_step.hpp"
#include "tests/support/stories260k_fixture.hpp"

using namespace fp8lab;
using namespace fp8lab::train;

TEST_CASE("operand stats: saturated, flushed and SQNR of a hand-made operand follow their definitions") {
  // One row, scale 1 (codes set by hand, as a quantizer with sf = 1 would): E4M3's largest finite
  // value is 448 and the spacing of its top binade 32, so unclamped RNE clips above the tie 464
  // (464 itself rounds to 448's even significand); its smallest subnormal is 2^-9, so magnitudes
  // up to the tie 2^-10 flush to zero.
  const std::vector<float> x{500.0f, 460.0f, 464.0f, 470.0f, -1e-4f, 0.0f, 0.002f, std::ldexp(1.0f, -10), 3.0f};
  QuantizedTensor q = make_quantized_tensor(1, static_cast<std::int64_t>(x.size()), {Fp8Format::e4m3, Granularity::row(), ScaleRule::fp32});
  q.scales[0] = 1.0f;
  for (std::size_t i = 0; i < x.size(); ++i) q.codes[i] = static_cast<std::uint8_t>(encode<E4M3>(x[i]));
  OperandTally t;
  tally_operand(q, x, t);
  CHECK(t.elements == 9);
  CHECK(t.saturated == 2);  // 500 and 470
  CHECK(t.flushed == 2);    // -1e-4 and 2^-10 (the tie rounds to the even code 0)
  // Signal and noise from the values each element decodes to, summed here in FP64.
  const std::vector<double> back{448, 448, 448, 448, 0, 0, std::ldexp(1.0, -9), 0, 3};
  double signal = 0, noise = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    signal += static_cast<double>(x[i]) * x[i];
    noise += (x[i] - back[i]) * (x[i] - back[i]);
  }
  CHECK(t.signal == signal);
  CHECK(t.noise == noise);
  CHECK(t.sqnr_db() == 10 * std::log10(signal / noise));

  // E5M2: fmt_max 57344 has an odd significand, so the tie 61440 above it rounds up and is clipped.
  const std::vector<float> y{61440.0f, 61439.0f};
  QuantizedTensor q5 = make_quantized_tensor(1, 2, {Fp8Format::e5m2, Granularity::row(), ScaleRule::fp32});
  q5.scales[0] = 1.0f;
  for (std::size_t i = 0; i < y.size(); ++i) q5.codes[i] = static_cast<std::uint8_t>(encode<E5M2>(y[i]));
  OperandTally t5;
  tally_operand(q5, y, t5);
  CHECK(t5.saturated == 1);
  // E2M1: fmt_max 6 (significand 1.1, odd), next binade 8, so unclamped RNE clips from the tie 7 on.
  const std::vector<float> z{7.0f, 6.99f, -7.5f, 6.0f};
  QuantizedTensor q4 = make_quantized_tensor(1, 4, {ElementFormat::Kind::e2m1, Granularity::row(), ScaleRule::fp32});
  q4.scales[0] = 1.0f;
  for (std::size_t i = 0; i < z.size(); ++i) q4.codes[i] = static_cast<std::uint8_t>(encode<E2M1>(z[i]));
  OperandTally t4;
  tally_operand(q4, z, t4);
  CHECK(t4.saturated == 2);  // 7 and -7.5
  CHECK(OperandTally{}.sqnr_db() != OperandTally{}.sqnr_db());  // NaN without elements
}

TEST_CASE("operand stats: the engine tallies every FP8 GEMM's operands and computes the same bits") {
  const LlamaWeights& w = test::stories260k_weights();
  const ModelConfig model = config_of(w);
  const std::vector<int> tokens(test::stories260k_tokens().begin(), test::stories260k_tokens().begin() + 33);
  const std::int64_t T = 33;
  const PrecisionRecipe recipe = named_recipe("deepseek_v3");
  const ActivationPolicy policy = make_policy("none", model, T, 4);
  HostAllocator host;
  MemoryLedger ledger(&host);
  const StepResult plain = run_training_step({model, &w, tokens}, recipe, policy, ledger);
  Fp8OperandStats stats;
  StepInput with{model, &w, tokens};
  with.operand_stats = &stats;
  const StepResult tallied = run_training_step(with, recipe, policy, ledger);
  CHECK(tallied.report.loss == plain.report.loss);
  for (std::size_t t = 0; t < plain.gradients.size(); ++t) CHECK(tallied.gradients[t].values == plain.gradients[t].values);

  // 7 linear layers a block x 3 kinds; the classifier stays BF16 in this recipe.
  CHECK(stats.entries().size() == static_cast<std::size_t>(7 * model.layers * 3));
  const GemmOperandTally& wq = stats.entry("L0.wq", GemmKind::fprop);
  CHECK(wq.a.elements == T * model.dim);          // X: T x dim
  CHECK(wq.b.elements == model.dim * model.dim);  // W: dim x dim
  CHECK(stats.entry("L1.w2", GemmKind::wgrad).a.elements == model.dim * T);  // dY^T: dim x T
  for (const GemmOperandTally& e : stats.entries()) {
    CAPTURE(e.layer, gemm_kind_name(e.kind));
    CHECK(e.a.saturated == 0);  // current scaling maps each tile's amax inside the range
    CHECK(e.a.sqnr_db() > 20);  // E4M3 RNE: about 31 dB on Gaussian-like data, far above 20
    CHECK(e.b.sqnr_db() > 20);
  }

  // The tally is of the tensor the GEMM quantized: Fprop's B operand of L0.wq is W itself,
  // quantized here independently (128x128 blocks, as the recipe says) and tallied.
  const std::vector<float> wq0(w.wq.begin(), w.wq.begin() + model.dim * model.dim);
  const QuantizedTensor qw = cpu::quantize(wq0, model.dim, model.dim, {Fp8Format::e4m3, Granularity::block(128), ScaleRule::fp32});
  OperandTally expected;
  tally_operand(qw, wq0, expected);
  CHECK(wq.b.signal == expected.signal);
  CHECK(wq.b.noise == expected.noise);
}
