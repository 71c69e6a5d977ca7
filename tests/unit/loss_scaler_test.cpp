// The loss scaler: config validation (each bad field named), the text form of its state, and
// a resumed scaler continuing the same trajectory. Its equality with the frameworks'
// definitions is tested against the FP64 references (tests/reference/loss_scaler_ref_test.cpp).
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/loss_scaling/loss_scaler.hpp"

using namespace fp8lab;

TEST_CASE("loss scaler config: the presets are the frameworks' defaults and valid") {
  const LossScalerConfig p = LossScalerConfig::pytorch();
  CHECK(p.initial_scale == 65536.0);
  CHECK(p.growth_factor == 2.0);
  CHECK(p.backoff_factor == 0.5);
  CHECK(p.growth_interval == 2000);
  CHECK_NOTHROW(p.validate());
  CHECK_NOTHROW(LossScalerConfig::megatron().validate());
  CHECK_NOTHROW(LossScalerConfig::deepspeed().validate());
  CHECK(LossScaler(p).scale() == 65536.0f);
  CHECK(LossScaler(p).inverse_scale() == 1.0f / 65536.0f);
}

TEST_CASE("loss scaler config: every bad value is rejected with its field named") {
  struct Case {
    const char* field;
    std::function<void(LossScalerConfig&)> spoil;
  };
  const double inf = std::numeric_limits<double>::infinity(), nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<Case> cases = {
      {"initial_scale", [](LossScalerConfig& c) { c.initial_scale = 0.0; }},
      {"initial_scale", [](LossScalerConfig& c) { c.initial_scale = -1.0; }},
      {"initial_scale", [=](LossScalerConfig& c) { c.initial_scale = inf; }},
      {"initial_scale", [=](LossScalerConfig& c) { c.initial_scale = nan; }},
      {"initial_scale", [](LossScalerConfig& c) { c.initial_scale = 1e39; }},   // beyond FP32
      {"initial_scale", [](LossScalerConfig& c) { c.initial_scale = 1e-46; }},  // rounds to FP32 zero
      {"growth_factor", [](LossScalerConfig& c) { c.growth_factor = 1.0; }},
      {"growth_factor", [](LossScalerConfig& c) { c.growth_factor = 0.5; }},
      {"growth_factor", [=](LossScalerConfig& c) { c.growth_factor = nan; }},
      {"growth_factor", [=](LossScalerConfig& c) { c.growth_factor = inf; }},
      {"backoff_factor", [](LossScalerConfig& c) { c.backoff_factor = 0.0; }},
      {"backoff_factor", [](LossScalerConfig& c) { c.backoff_factor = 1.0; }},
      {"backoff_factor", [](LossScalerConfig& c) { c.backoff_factor = -0.5; }},
      {"backoff_factor", [=](LossScalerConfig& c) { c.backoff_factor = nan; }},
      {"growth_interval", [](LossScalerConfig& c) { c.growth_interval = 0; }},
      {"growth_interval", [](LossScalerConfig& c) { c.growth_interval = -3; }},
      {"hysteresis", [](LossScalerConfig& c) { c.hysteresis = 0; }},
      {"hysteresis", [](LossScalerConfig& c) { c.hysteresis = 2; }},  // pytorch has none
      {"min_scale", [](LossScalerConfig& c) { c.min_scale = 1.0; }},  // pytorch has none
      {"min_scale", [=](LossScalerConfig& c) { c.min_scale = nan; }},
      {"consecutive_hysteresis", [](LossScalerConfig& c) { c.consecutive_hysteresis = true; }},
      {"raise_at_min_scale", [](LossScalerConfig& c) { c.raise_at_min_scale = true; }},
      {"min_scale", [](LossScalerConfig& c) { c = LossScalerConfig::megatron(); c.min_scale = 0.0; }},
      {"min_scale", [](LossScalerConfig& c) { c = LossScalerConfig::megatron(); c.min_scale = -1.0; }},
      {"min_scale", [](LossScalerConfig& c) { c = LossScalerConfig::deepspeed(); c.min_scale = 1e6; }},  // > initial
      {"consecutive_hysteresis", [](LossScalerConfig& c) { c = LossScalerConfig::megatron(); c.consecutive_hysteresis = true; }},
      {"hysteresis", [](LossScalerConfig& c) { c = LossScalerConfig::deepspeed(); c.hysteresis = 0; }},
  };
  for (const Case& k : cases) {
    LossScalerConfig c;
    k.spoil(c);
    INFO("field " << k.field << ", variant " << loss_scaler_variant_name(c.variant));
    CHECK_THROWS_WITH(c.validate(), Catch::StartsWith(std::string("loss scaler: field '") + k.field + "'"));
    CHECK_THROWS_AS(LossScaler(c), std::invalid_argument);  // the scaler refuses it too
  }
  CHECK_THROWS_WITH(parse_loss_scaler_variant("apex"), Catch::Contains("not one of pytorch, megatron, deepspeed"));
}

TEST_CASE("loss scaler state: text form round-trips and malformed text names the field") {
  LossScalerState s;
  s.variant = LossScalerVariant::megatron;
  s.scale = 0.1f;  // not a short decimal: the text must still read back as the same FP32 value
  s.clean_steps = 17;
  s.tolerated_overflows = 1;
  s.steps = 123456789012;
  CHECK(s.to_string() == "variant=megatron;scale=0.1;clean_steps=17;tolerated_overflows=1;steps=123456789012");
  CHECK(LossScalerState::from_string(s.to_string()) == s);
  s.scale = std::nextafter(1.0f, 2.0f);
  CHECK(LossScalerState::from_string(s.to_string()).scale == s.scale);

  const auto error = [](const std::string& text) {
    try {
      LossScalerState::from_string(text);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const std::string good = "variant=pytorch;scale=65536;clean_steps=0;tolerated_overflows=0;steps=0";
  CHECK(LossScalerState::from_string(good).scale == 65536.0f);
  CHECK_THAT(error("variant=pytorch;scale=65536;clean_steps=0;tolerated_overflows=0"), Catch::Contains("field 'steps': missing"));
  CHECK_THAT(error(good + ";steps=1"), Catch::Contains("field 'steps': given twice"));
  CHECK_THAT(error(good + ";speed=1"), Catch::Contains("field 'speed': unknown field"));
  CHECK_THAT(error("variant=apex;scale=1;clean_steps=0;tolerated_overflows=0;steps=0"), Catch::Contains("field 'variant'"));
  CHECK_THAT(error("variant=pytorch;scale=inf;clean_steps=0;tolerated_overflows=0;steps=0"), Catch::Contains("field 'scale'"));
  CHECK_THAT(error("variant=pytorch;scale=1x;clean_steps=0;tolerated_overflows=0;steps=0"), Catch::Contains("field 'scale'"));
  CHECK_THAT(error("variant=pytorch;scale=1;clean_steps=-1;tolerated_overflows=0;steps=0"), Catch::Contains("field 'clean_steps'"));
  CHECK_THAT(error("variant=pytorch;scale=1;clean_steps=0;tolerated_overflows=0;steps"), Catch::Contains("expected key=value"));

  // A state that cannot belong to the config it is resumed with.
  LossScalerState wrong = LossScaler(LossScalerConfig::megatron()).state();
  CHECK_THROWS_WITH(LossScaler(LossScalerConfig::pytorch(), wrong), Catch::Contains("field 'variant'"));
  wrong.tolerated_overflows = 2;  // hysteresis 2 allows at most 1
  CHECK_THROWS_WITH(LossScaler(LossScalerConfig::megatron(), wrong), Catch::Contains("field 'tolerated_overflows'"));
}

TEST_CASE("loss scaler: a scaler resumed from its saved text continues the same trajectory") {
  std::mt19937_64 rng(14);
  for (LossScalerConfig config : {LossScalerConfig::pytorch(), LossScalerConfig::megatron(), LossScalerConfig::deepspeed()}) {
    config.growth_interval = 3;
    config.raise_at_min_scale = false;
    std::bernoulli_distribution overflow(0.3);
    std::vector<bool> steps(400);
    for (std::size_t i = 0; i < steps.size(); ++i) steps[i] = overflow(rng);
    for (std::size_t cut : {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{200}, std::size_t{399}}) {
      LossScaler uninterrupted(config), first_half(config);
      for (std::size_t i = 0; i < cut; ++i) {
        uninterrupted.update(steps[i]);
        first_half.update(steps[i]);
      }
      const std::string saved = first_half.state().to_string();
      LossScaler resumed(config, LossScalerState::from_string(saved));
      INFO(loss_scaler_variant_name(config.variant) << " resumed after " << cut << " steps from " << saved);
      for (std::size_t i = cut; i < steps.size(); ++i) {
        REQUIRE(resumed.update(steps[i]) == uninterrupted.update(steps[i]));
        REQUIRE(resumed.state() == uninterrupted.state());
      }
    }
  }
}

TEST_CASE("loss scaler: deepspeed with raise_at_min_scale throws at the floor and changes nothing") {
  LossScalerConfig c = LossScalerConfig::deepspeed();
  c.initial_scale = 4.0;
  c.min_scale = 2.0;
  c.hysteresis = 1;
  LossScaler s(c);
  CHECK(s.update(true));  // 4 -> 2
  CHECK(s.scale() == 2.0f);
  const LossScalerState before = s.state();
  CHECK_THROWS_AS(s.update(true), LossScaleAtMinimum);
  CHECK(s.state() == before);
  c.raise_at_min_scale = false;  // without the option the scale stays at the floor
  LossScaler quiet(c);
  quiet.update(true);
  quiet.update(true);
  CHECK(quiet.scale() == 2.0f);
}
