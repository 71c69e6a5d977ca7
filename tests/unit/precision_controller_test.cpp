// The adaptive precision controller (harness/train/precision_controller.hpp) beside its switching
// (precision_controller_switching_test.cpp): gemm_statistic and fp8_flop_fraction against hand
// values, the config's and the controller's refusals, and its state saved, restored and continued.
// Synthetic probe tallies: tests/support/precision_controller_probes.hpp.
#include <catch2/catch.hpp>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/train/precision_controller.hpp"
#include "tests/support/precision_controller_probes.hpp"

using namespace fp8lab;
using namespace fp8lab::train;

using test::operand_with_sqnr;
using test::probe;
using test::probe_one;
using test::sqnr_band;
using test::stories260k;
using test::stories260k_layers;

namespace {

using Statistic = PrecisionControllerConfig::Statistic;

std::string validate_message(const PrecisionControllerConfig& c) {
  try {
    c.validate();
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace

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
