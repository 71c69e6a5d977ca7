// The adaptive precision controller (harness/train/precision_controller.hpp), driven by synthetic
// probe tallies. A tally with signal 1 and noise 10^(-s/10) has SQNR s dB; one with signal 1 and
// noise r^2 has gradient noise ratio r. Expected values are worked out by hand from the header.
#include <catch2/catch.hpp>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/train/precision_controller.hpp"

using namespace fp8lab;
using namespace fp8lab::train;

namespace {

using Statistic = PrecisionControllerConfig::Statistic;
using Kind = GemmPrecision::Kind;

OperandTally operand_with_sqnr(double db) { return {1.0, std::pow(10.0, -db / 10), 1, 0, 0}; }
OperandTally operand_with_ratio(double r) { return {1.0, r * r, 1, 0, 0}; }

// Every GEMM of `layers` measured at `db` for both operands.
std::vector<GemmOperandTally> probe(const std::vector<std::string>& layers, double db) {
  std::vector<GemmOperandTally> out;
  for (const std::string& l : layers)
    for (GemmKind k : kGemmKinds) out.push_back({l, k, operand_with_sqnr(db), operand_with_sqnr(db)});
  return out;
}

// `probe` with one GEMM's operands replaced.
std::vector<GemmOperandTally> probe_with(const std::vector<std::string>& layers, double db, const std::string& layer,
                                         GemmKind kind, OperandTally a, OperandTally b) {
  std::vector<GemmOperandTally> out = probe(layers, db);
  for (GemmOperandTally& t : out)
    if (t.layer == layer && t.kind == kind) t.a = a, t.b = b;
  return out;
}

std::vector<GemmOperandTally> probe_one(const std::vector<std::string>& layers, double db, const std::string& layer,
                                        GemmKind kind, double one_db) {
  return probe_with(layers, db, layer, kind, operand_with_sqnr(one_db), operand_with_sqnr(one_db));
}

PrecisionControllerConfig sqnr_band(double low, double high, int patience, std::int64_t every = 1) {
  PrecisionControllerConfig c;
  c.every = every;
  c.statistic = Statistic::sqnr;
  c.band_low = low;
  c.band_high = high;
  c.patience = patience;
  return c;
}

// Function-local, so that the presets of another translation unit exist when they are read.
const ModelConfig& stories260k() {
  static const ModelConfig model = model_preset("stories260K");  // dim 64, hidden 172, 5 layers, kv_dim 32, vocab 512
  return model;
}
const std::vector<std::string>& stories260k_layers() {
  static const std::vector<std::string> layers = linear_layer_names(stories260k());
  return layers;
}

std::string validate_message(const PrecisionControllerConfig& c) {
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "accepted";
}

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

TEST_CASE("precision controller gemm_statistic: hand values") {
  // SQNR: A 10 log10(100 / 1) = 20 dB, B 10 log10(1000 / 1) = 30 dB -> 20.
  const GemmOperandTally t{"L0.wq", GemmKind::dgrad, {100.0, 1.0, 8, 0, 0}, {1000.0, 1.0, 8, 0, 0}};
  CHECK(gemm_statistic(Statistic::sqnr, t) == Approx(20.0).epsilon(1e-14));
  CHECK(gemm_statistic(Statistic::grad_noise, t) == Approx(0.1).epsilon(1e-14));  // sqrt(1 / 100), operand A
  GemmOperandTally fprop = t;
  fprop.kind = GemmKind::fprop;
  CHECK(std::isnan(gemm_statistic(Statistic::grad_noise, fprop)));
  CHECK(gemm_statistic(Statistic::sqnr, fprop) == Approx(20.0).epsilon(1e-14));
  GemmOperandTally empty_b = t;
  empty_b.b = {};
  CHECK(std::isnan(gemm_statistic(Statistic::sqnr, empty_b)));
  GemmOperandTally exact = t;
  exact.a.noise = exact.b.noise = 0;
  CHECK(std::isinf(gemm_statistic(Statistic::sqnr, exact)));
  CHECK(gemm_statistic(Statistic::grad_noise, exact) == 0.0);
}

TEST_CASE("precision controller fp8_flop_fraction on stories260K equals the hand count") {
  const ModelConfig& model = stories260k();
  const std::vector<std::string>& layers = stories260k_layers();
  // Weight out x in per linear layer (dim 64, hidden 172, kv_dim 4 * 8 = 32, vocab 512); a GEMM
  // costs 2 T out in, each of Fprop, Dgrad and Wgrad:
  //   wq, wo  64 x 64  = 4096     wk, wv  32 x 64 = 2048     w1, w3  172 x 64 = 11008
  //   w2      64 x 172 = 11008    classifier 512 x 64 = 32768
  //   a block: 2 (4096) + 2 (2048) + 3 (11008) = 45312; 5 blocks 226560; with the classifier 259328.
  const double T = 100, blocks = 226560, classifier = 32768, all = 3 * 2 * T * (blocks + classifier);
  {
    const PrecisionController hybrid(sqnr_band(20, 30, 1), named_recipe("hybrid"), layers);
    CHECK(hybrid.fp8_flop_fraction(model, 100) == 1.0);
  }
  // The free function, of fixed recipes.
  CHECK(fp8_flop_fraction(named_recipe("bf16"), model, 100) == 0.0);
  CHECK(fp8_flop_fraction(named_recipe("fp8_delayed"), model, 100) == Approx(blocks / (blocks + classifier)).epsilon(1e-15));
  PrecisionController ctrl(sqnr_band(20, 30, 1), named_recipe("deepseek_v3"), layers);
  // The classifier is BF16 in deepseek_v3.
  CHECK(ctrl.fp8_flop_fraction(model, 100) == Approx(3 * 2 * T * blocks / all).epsilon(1e-15));
  // L0.w1's Dgrad and L3.wk's Fprop to BF16 (L0.w1's and L3.wk's Wgrad stay FP8, repaired).
  auto t = probe_one(layers, 35, "L0.w1", GemmKind::dgrad, 10);
  for (GemmOperandTally& x : t)
    if (x.layer == "L3.wk" && x.kind == GemmKind::fprop) x.a = operand_with_sqnr(10);
  ctrl.observe(0, t);
  REQUIRE(ctrl.switches().size() == 2);
  const double fp8 = 2 * T * (3 * blocks - 11008 - 2048);
  CHECK(ctrl.fp8_flop_fraction(model, 100) == Approx(fp8 / all).epsilon(1e-15));
  CHECK(ctrl.fp8_flop_fraction(model, 7) == Approx(fp8 / all).epsilon(1e-15));  // every GEMM scales with T
  CHECK_THROWS_AS(ctrl.fp8_flop_fraction(model, 0), std::invalid_argument);
  // A model without the controller's layers (stories260K has L4, dim256 stops at L3).
  CHECK_THROWS_AS(ctrl.fp8_flop_fraction(model_preset("dim256"), 100), std::invalid_argument);
}

TEST_CASE("precision controller config validate: each refusal starts with its spec field") {
  const std::vector<std::string>& layers = stories260k_layers();
  const PrecisionControllerConfig good = sqnr_band(20, 30, 2, 10);
  CHECK(validate_message(good) == "accepted");
  auto with = [&](auto change) {
    PrecisionControllerConfig c = good;
    change(c);
    return validate_message(c);
  };
  CHECK_THAT(with([](auto& c) { c.every = 0; }), Catch::StartsWith("adaptive_every:"));
  CHECK_THAT(with([](auto& c) { c.statistic = static_cast<Statistic>(7); }), Catch::StartsWith("adaptive_statistic:"));
  CHECK_THAT(with([](auto& c) { c.band_low = std::nan(""); }), Catch::StartsWith("adaptive_low:"));
  CHECK_THAT(with([](auto& c) { c.band_high = INFINITY; }), Catch::StartsWith("adaptive_high:"));
  CHECK_THAT(with([](auto& c) { c.band_low = 30; }), Catch::StartsWith("adaptive_low: must be below adaptive_high"));
  CHECK_THAT(with([](auto& c) { c.band_low = 31; }), Catch::StartsWith("adaptive_low: must be below adaptive_high"));
  CHECK_THAT(with([](auto& c) { c.statistic = Statistic::grad_noise, c.band_low = -0.1, c.band_high = 0.2; }),
             Catch::StartsWith("adaptive_low:"));
  CHECK_THAT(with([](auto& c) { c.patience = 0; }), Catch::StartsWith("adaptive_patience:"));
  CHECK(validate_message(PrecisionControllerConfig{}) != "accepted");  // thresholds have no default
  CHECK(parse_adaptive_statistic("grad_noise") == Statistic::grad_noise);
  CHECK_THROWS_WITH(parse_adaptive_statistic("snr"), Catch::StartsWith("adaptive_statistic:"));
  // The constructor validates too.
  PrecisionControllerConfig impatient = good;
  impatient.patience = 0;
  CHECK_THROWS_WITH(PrecisionController(impatient, named_recipe("hybrid"), layers), Catch::StartsWith("adaptive_patience:"));
}

TEST_CASE("precision controller refuses a bad high precision, layer list, or observation, and changes nothing") {
  const std::vector<std::string>& layers = stories260k_layers();
  const auto config = sqnr_band(20, 30, 1, 2);
  const PrecisionRecipe base = named_recipe("hybrid");
  CHECK_THROWS_AS(PrecisionController(config, base, layers, named_recipe("hybrid").fprop), std::invalid_argument);
  CHECK_THROWS_AS(PrecisionController(config, base, {"L0.wq", "L0.wq"}), std::invalid_argument);
  CHECK_THROWS_AS(PrecisionController(config, base, {}), std::invalid_argument);
  PrecisionController ctrl(config, base, layers);
  CHECK_THROWS_AS(ctrl.observe(1, probe(layers, 10)), std::invalid_argument);  // not due
  ctrl.observe(2, probe(layers, 25));
  CHECK_THROWS_AS(ctrl.observe(2, probe(layers, 10)), std::invalid_argument);  // observed already
  CHECK_THROWS_AS(ctrl.observe(0, probe(layers, 10)), std::invalid_argument);  // before the last one
  auto doubled = probe(layers, 10);
  doubled.push_back(doubled.front());
  CHECK_THROWS_AS(ctrl.observe(4, doubled), std::invalid_argument);
  auto stranger = probe(layers, 10);
  stranger.push_back({"L9.wq", GemmKind::fprop, operand_with_sqnr(10), operand_with_sqnr(10)});
  CHECK_THROWS_AS(ctrl.observe(4, stranger), std::invalid_argument);
  CHECK(ctrl.switches().empty());  // the refused calls' 10 dB never counted
  CHECK(ctrl.state().last_step == 2);
}

TEST_CASE("precision controller state: save, restore into a new controller, continue identically") {
  const std::vector<std::string>& layers = stories260k_layers();
  const auto config = sqnr_band(20, 30, 3);
  const PrecisionRecipe base = named_recipe("deepseek_v3");
  // A deterministic, varied schedule: GEMM g at step s gets 10 + (7 g + s) mod 25 dB, a saw-tooth
  // that spends 10 steps below 20 dB and 4 above 30 per period, offset per GEMM.
  const auto tallies = [&](std::int64_t s) {
    std::vector<GemmOperandTally> out = probe(layers, 0);
    for (std::size_t g = 0; g < out.size(); ++g) {
      const double db = 10 + static_cast<double>((7 * static_cast<std::int64_t>(g) + s) % 25);
      out[g].a = out[g].b = operand_with_sqnr(db);
    }
    return out;
  };
  PrecisionController straight(config, base, layers), first(config, base, layers);
  for (std::int64_t s = 0; s < 12; ++s) straight.observe(s, tallies(s)), first.observe(s, tallies(s));
  const PrecisionControllerState saved = first.state();
  REQUIRE_FALSE(saved.switches.empty());
  bool some_streak = false;
  for (std::int64_t k : saved.streak) some_streak = some_streak || k > 0;
  REQUIRE(some_streak);  // the counters matter to what comes next
  CHECK(saved.last_step == 11);
  CHECK(saved.high.size() == 3 * layers.size());

  PrecisionController resumed(config, base, layers);
  resumed.restore(saved);
  CHECK(resumed.state() == saved);
  for (std::int64_t s = 12; s < 30; ++s) straight.observe(s, tallies(s)), resumed.observe(s, tallies(s));
  CHECK(resumed.state() == straight.state());
  REQUIRE(resumed.switches().size() == straight.switches().size());
  for (std::size_t i = 0; i < straight.switches().size(); ++i) {
    CHECK(resumed.switches()[i].layer == straight.switches()[i].layer);
    CHECK(resumed.switches()[i].kind == straight.switches()[i].kind);
    CHECK(resumed.switches()[i].step == straight.switches()[i].step);
    CHECK(resumed.switches()[i].statistic == straight.switches()[i].statistic);
    CHECK(resumed.switches()[i].to_fp8 == straight.switches()[i].to_fp8);
  }
  for (const std::string& l : layers)
    for (GemmKind k : kGemmKinds) CHECK(resumed.current().resolve(l, k) == straight.current().resolve(l, k));

  // States that do not fit are refused, and the controller keeps its own.
  const PrecisionControllerState before = resumed.state();
  auto refused = [&](auto change) {
    PrecisionControllerState s = saved;
    change(s);
    try {
      resumed.restore(s);
    } catch (const std::invalid_argument&) {
      return resumed.state() == before;
    }
    return false;
  };
  CHECK(refused([](auto& s) { s.high.pop_back(); }));
  CHECK(refused([](auto& s) { s.high[0] = 2; }));
  CHECK(refused([&](auto& s) { s.high[3 * (layers.size() - 1)] = 1; }));  // classifier Fprop: BF16 in the base
  CHECK(refused([](auto& s) { s.streak[0] = 3; }));                          // patience 3: at most 2
  CHECK(refused([](auto& s) { s.switches.push_back({5, 999, 10, 0}); }));
  CHECK(refused([](auto& s) { s.switches.push_back({40, 0, 10, 0}); }));      // after the last step
}
