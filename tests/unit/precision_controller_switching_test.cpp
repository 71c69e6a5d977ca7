// The adaptive precision controller's switching (harness/train/precision_controller.hpp), driven
// by synthetic probe tallies (tests/support/precision_controller_probes.hpp): the band and its
// patience, the switch log, what current() resolves, the GEMMs that never switch, a missing
// measurement, deepseek_v3's transposed Wgrad, and the grad_noise statistic. Expected values are
// worked out by hand from the header.
#include <catch2/catch.hpp>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/train/precision_controller.hpp"
#include "tests/support/precision_controller_probes.hpp"

using namespace fp8lab;
using namespace fp8lab::train;

using test::operand_with_ratio;
using test::operand_with_sqnr;
using test::probe;
using test::probe_one;
using test::probe_with;
using test::sqnr_band;
using test::stories260k;
using test::stories260k_layers;

namespace {

using Statistic = PrecisionControllerConfig::Statistic;
using Kind = GemmPrecision::Kind;

}  // namespace

TEST_CASE("precision controller sqnr band 20..30 dB, patience 1: a value inside the band never switches") {
  const std::vector<std::string>& layers = stories260k_layers();
  PrecisionController ctrl(sqnr_band(20, 30, 1), named_recipe("hybrid"), layers);
  // Inside the band, the edges included (equal to a threshold is inside).
  const double inside[] = {20.0, 29.0, 21.0, 30.0, 25.0, 20.0001, 29.9999};
  std::int64_t step = 0;
  for (int round = 0; round < 5; ++round)
    for (double db : inside) ctrl.observe(step++, probe_one(layers, 35, "L0.wq", GemmKind::dgrad, db));
  CHECK(ctrl.switches().empty());
  CHECK_FALSE(ctrl.in_high_precision("L0.wq", GemmKind::dgrad));
  CHECK(ctrl.current().overrides.empty());

  // Below 20 once: to BF16. Then inside the band again, even just above the low edge: it stays
  // there (hysteresis); only a value above 30 brings it back.
  ctrl.observe(step++, probe_one(layers, 35, "L0.wq", GemmKind::dgrad, 19.5));
  REQUIRE(ctrl.switches().size() == 1);
  CHECK(ctrl.in_high_precision("L0.wq", GemmKind::dgrad));
  for (int round = 0; round < 5; ++round)
    for (double db : inside) ctrl.observe(step++, probe_one(layers, 35, "L0.wq", GemmKind::dgrad, db));
  CHECK(ctrl.switches().size() == 1);
  CHECK(ctrl.in_high_precision("L0.wq", GemmKind::dgrad));
  ctrl.observe(step++, probe_one(layers, 35, "L0.wq", GemmKind::dgrad, 30.5));
  REQUIRE(ctrl.switches().size() == 2);
  CHECK_FALSE(ctrl.in_high_precision("L0.wq", GemmKind::dgrad));
  CHECK(ctrl.current().overrides.empty());
}

TEST_CASE("precision controller patience 3, every 2: a switch needs 3 consecutive evaluations beyond the threshold") {
  const std::vector<std::string>& layers = stories260k_layers();
  PrecisionController ctrl(sqnr_band(20, 30, 3, 2), named_recipe("hybrid"), layers);
  CHECK(ctrl.due(0));
  CHECK_FALSE(ctrl.due(3));
  CHECK(ctrl.due(4));
  CHECK_FALSE(ctrl.due(-2));
  // Observed steps 0, 2, 4, ...: bad, bad, inside (resets), bad, bad: no switch yet.
  const double to_high[] = {15, 15, 25, 15, 15};
  std::int64_t step = 0;
  for (double db : to_high) {
    ctrl.observe(step, probe_one(layers, 35, "L1.w2", GemmKind::wgrad, db));
    step += 2;
  }
  CHECK(ctrl.switches().empty());
  ctrl.observe(step, probe_one(layers, 35, "L1.w2", GemmKind::wgrad, 15));  // the third in a row: step 10
  REQUIRE(ctrl.switches().size() == 1);
  CHECK(ctrl.switches()[0].step == 10);
  CHECK(ctrl.in_high_precision("L1.w2", GemmKind::wgrad));
  step += 2;
  // Back: good, good, inside (resets), good, good, good -> back on the sixth (step 22).
  const double to_fp8[] = {35, 35, 29, 35, 35};
  for (double db : to_fp8) {
    ctrl.observe(step, probe_one(layers, 35, "L1.w2", GemmKind::wgrad, db));
    step += 2;
  }
  CHECK(ctrl.switches().size() == 1);
  ctrl.observe(step, probe_one(layers, 35, "L1.w2", GemmKind::wgrad, 35));
  REQUIRE(ctrl.switches().size() == 2);
  CHECK(ctrl.switches()[1].step == 22);
  CHECK_FALSE(ctrl.in_high_precision("L1.w2", GemmKind::wgrad));
}

TEST_CASE("precision controller switch log: step, layer, kind, statistic (min of A and B), direction, in layer order") {
  const std::vector<std::string>& layers = stories260k_layers();
  PrecisionController ctrl(sqnr_band(20, 30, 1), named_recipe("hybrid"), layers);
  // Step 0: L1.w2 wgrad (B at 10 dB, A at 40: statistic 10) and L0.wq fprop (A at 12) leave FP8.
  auto tallies = probe_with(layers, 35, "L1.w2", GemmKind::wgrad, operand_with_sqnr(40), {100.0, 10.0, 4, 0, 0});
  for (GemmOperandTally& t : tallies)
    if (t.layer == "L0.wq" && t.kind == GemmKind::fprop) t.a = {1000.0, 1000.0 / std::pow(10.0, 1.2), 4, 0, 0};
  ctrl.observe(0, tallies);
  // Step 1: L0.wq fprop back (both at 31 dB).
  ctrl.observe(1, probe_one(layers, 25, "L0.wq", GemmKind::fprop, 31));
  const auto& log = ctrl.switches();
  REQUIRE(log.size() == 3);
  CHECK(log[0].step == 0);
  CHECK(log[0].layer == "L0.wq");  // layer order: L0 before L1, whatever the tallies' order
  CHECK(log[0].kind == GemmKind::fprop);
  CHECK(log[0].statistic == Approx(12.0).epsilon(1e-12));
  CHECK_FALSE(log[0].to_fp8);
  CHECK(log[1].step == 0);
  CHECK(log[1].layer == "L1.w2");
  CHECK(log[1].kind == GemmKind::wgrad);
  CHECK(log[1].statistic == Approx(10.0).epsilon(1e-12));  // 10 log10(100 / 10): B, the smaller
  CHECK_FALSE(log[1].to_fp8);
  CHECK(log[2].step == 1);
  CHECK(log[2].layer == "L0.wq");
  CHECK(log[2].kind == GemmKind::fprop);
  CHECK(log[2].statistic == Approx(31.0).epsilon(1e-12));
  CHECK(log[2].to_fp8);
}

TEST_CASE("precision controller current(): the switched GEMM resolves to BF16, every other one to the base recipe") {
  const ModelConfig& model = stories260k();
  const std::vector<std::string>& layers = stories260k_layers();
  const PrecisionRecipe base = named_recipe("hybrid");
  PrecisionController ctrl(sqnr_band(20, 30, 1), base, layers);
  ctrl.observe(0, probe_one(layers, 35, "L2.w1", GemmKind::dgrad, 10));
  const PrecisionRecipe now = ctrl.current();
  REQUIRE_NOTHROW(now.validate(model));
  for (const std::string& l : layers)
    for (GemmKind k : kGemmKinds) {
      INFO(gemm_kind_name(k) << " of " << l);
      if (l == "L2.w1" && k == GemmKind::dgrad)
        CHECK(now.resolve(l, k) == GemmPrecision::plain(Kind::bf16));
      else
        CHECK(now.resolve(l, k) == base.resolve(l, k));
    }
  // Another high precision, when asked for.
  PrecisionController fp16(sqnr_band(20, 30, 1), base, layers, GemmPrecision::plain(Kind::fp16));
  fp16.observe(0, probe_one(layers, 35, "L2.w1", GemmKind::dgrad, 10));
  CHECK(fp16.current().resolve("L2.w1", GemmKind::dgrad) == GemmPrecision::plain(Kind::fp16));
}

TEST_CASE("precision controller: GEMMs not FP8 in the base recipe, and GEMMs without a tally, never switch") {
  const std::vector<std::string>& layers = stories260k_layers();
  // deepseek_v3 runs the classifier in BF16; hybrid plus an override keeps L0.wo's Wgrad in FP32.
  PrecisionRecipe hybrid = named_recipe("hybrid");
  hybrid.overrides.push_back({"L0.wo", std::nullopt, std::nullopt, GemmPrecision::plain(Kind::fp32)});
  for (const PrecisionRecipe& base : {named_recipe("deepseek_v3"), hybrid}) {
    INFO(base.name);
    PrecisionController ctrl(sqnr_band(20, 30, 1), base, layers);
    // Terrible SQNR everywhere but on L3.w3's Fprop, which the probe leaves out.
    std::vector<GemmOperandTally> tallies;
    for (const GemmOperandTally& t : probe(layers, 5))
      if (!(t.layer == "L3.w3" && t.kind == GemmKind::fprop)) tallies.push_back(t);
    ctrl.observe(0, tallies);
    for (const std::string& l : layers)
      for (GemmKind k : kGemmKinds) {
        INFO(gemm_kind_name(k) << " of " << l);
        const bool fixed = base.resolve(l, k).kind != Kind::fp8 || (l == "L3.w3" && k == GemmKind::fprop);
        CHECK(ctrl.in_high_precision(l, k) == !fixed);
        if (fixed) CHECK(ctrl.current().resolve(l, k) == base.resolve(l, k));
        else CHECK(ctrl.current().resolve(l, k) == GemmPrecision::plain(Kind::bf16));
      }
    // 36 layers x 3 GEMMs, less the fixed ones: deepseek_v3's 3 classifier GEMMs or L0.wo's Wgrad,
    // and L3.w3's Fprop.
    CHECK(ctrl.switches().size() == 3 * layers.size() - (base.name == "deepseek_v3" ? 3 : 1) - 1);
  }
}

TEST_CASE("precision controller patience 2: a missing measurement neither counts nor breaks the streak") {
  const std::vector<std::string>& layers = stories260k_layers();
  PrecisionController ctrl(sqnr_band(20, 30, 2), named_recipe("hybrid"), layers);
  ctrl.observe(0, probe_one(layers, 35, "L4.wv", GemmKind::fprop, 10));
  std::vector<GemmOperandTally> without;
  for (const GemmOperandTally& t : probe(layers, 35))
    if (!(t.layer == "L4.wv" && t.kind == GemmKind::fprop)) without.push_back(t);
  ctrl.observe(1, without);
  // No elements: SQNR NaN, not evaluated either.
  ctrl.observe(2, probe_with(layers, 35, "L4.wv", GemmKind::fprop, {}, {}));
  CHECK(ctrl.switches().empty());
  ctrl.observe(3, probe_one(layers, 35, "L4.wv", GemmKind::fprop, 10));
  REQUIRE(ctrl.switches().size() == 1);
  CHECK(ctrl.switches()[0].step == 3);
}

TEST_CASE("precision controller deepseek_v3: a Wgrad beside a BF16 Dgrad stays FP8 without requantize_transposed") {
  const ModelConfig& model = stories260k();
  const std::vector<std::string>& layers = stories260k_layers();
  const PrecisionRecipe base = named_recipe("deepseek_v3");
  PrecisionController ctrl(sqnr_band(20, 30, 1), base, layers);
  ctrl.observe(0, probe_one(layers, 35, "L0.wq", GemmKind::dgrad, 10));
  const PrecisionRecipe now = ctrl.current();
  REQUIRE_NOTHROW(now.validate(model));  // re-quantizing a BF16 Dgrad's dY would not validate
  const GemmPrecision& wgrad = now.resolve("L0.wq", GemmKind::wgrad);
  CHECK(wgrad.kind == Kind::fp8);
  CHECK_FALSE(wgrad.requantize_transposed);
  GemmPrecision expected = base.wgrad;
  expected.requantize_transposed = false;
  CHECK(wgrad == expected);
  CHECK(now.resolve("L0.wk", GemmKind::wgrad) == base.wgrad);  // other layers keep the re-quantization
  CHECK(now.resolve("L0.wq", GemmKind::fprop) == base.fprop);
  CHECK_FALSE(ctrl.in_high_precision("L0.wq", GemmKind::wgrad));
  // Back in FP8, the repair goes with it.
  ctrl.observe(1, probe(layers, 35));
  CHECK(ctrl.current().overrides.size() == base.overrides.size());
  CHECK(ctrl.current().resolve("L0.wq", GemmKind::wgrad) == base.wgrad);
}

TEST_CASE("precision controller grad_noise band 0.05..0.2: the gradient operand A of Dgrad and Wgrad decides; Fprop stays") {
  const std::vector<std::string>& layers = stories260k_layers();
  PrecisionControllerConfig c;
  c.statistic = Statistic::grad_noise;
  c.band_low = 0.05;
  c.band_high = 0.2;
  PrecisionController ctrl(c, named_recipe("hybrid"), layers);
  const auto quiet = [&] {
    std::vector<GemmOperandTally> out;
    for (const std::string& l : layers)
      for (GemmKind k : kGemmKinds) out.push_back({l, k, operand_with_ratio(0.1), operand_with_ratio(0.1)});
    return out;
  };
  // B (W^T) noisy, A (dY) quiet: no switch. Fprop with both operands at ratio 1: no switch either.
  auto t = quiet();
  for (GemmOperandTally& x : t) {
    if (x.layer == "L1.wk" && x.kind == GemmKind::dgrad) x.b = operand_with_ratio(0.9);
    if (x.layer == "L1.wk" && x.kind == GemmKind::fprop) x.a = x.b = operand_with_ratio(1.0);
  }
  ctrl.observe(0, t);
  CHECK(ctrl.switches().empty());
  // A noisy above 0.2: to BF16 (high is bad under grad_noise).
  t = quiet();
  for (GemmOperandTally& x : t)
    if (x.layer == "L1.wk" && x.kind == GemmKind::wgrad) x.a = operand_with_ratio(0.25);
  ctrl.observe(1, t);
  REQUIRE(ctrl.switches().size() == 1);
  CHECK(ctrl.switches()[0].kind == GemmKind::wgrad);
  CHECK(ctrl.switches()[0].statistic == Approx(0.25).epsilon(1e-12));
  // 0.1 is inside the band: stays; 0.04 is below 0.05: back to FP8.
  ctrl.observe(2, quiet());
  CHECK(ctrl.in_high_precision("L1.wk", GemmKind::wgrad));
  t = quiet();
  for (GemmOperandTally& x : t)
    if (x.layer == "L1.wk" && x.kind == GemmKind::wgrad) x.a = operand_with_ratio(0.04);
  ctrl.observe(3, t);
  REQUIRE(ctrl.switches().size() == 2);
  CHECK(ctrl.switches()[1].to_fp8);
  // Nor can a restored state put an Fprop in high precision under grad_noise.
  PrecisionControllerState fprop_high = ctrl.state();
  fprop_high.high[0] = 1;
  CHECK_THROWS_AS(ctrl.restore(fprop_high), std::invalid_argument);
}
