// The loss scaler against the frameworks' definitions: hand-derived trajectories (each
// reference and the scaler must follow them), then the scaler equal to the FP64 reference of
// its variant, scale bit for bit and skip for skip, on 10^5 random overflow sequences.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "kernels/loss_scaling/loss_scaler.hpp"
#include "reference/loss_scaler_ref.hpp"

using namespace fp8lab;

namespace {

struct Step {
  bool overflow;
  double scale_after;  // derived by hand from the framework's definition
};

template <class Scaler>
void follow(Scaler& scaler, const std::vector<Step>& steps, const char* who) {
  for (std::size_t i = 0; i < steps.size(); ++i) {
    INFO(who << " step " << i << (steps[i].overflow ? " (overflow)" : " (clean)"));
    CHECK(scaler.update(steps[i].overflow) == steps[i].overflow);  // skipped exactly on overflow
    CHECK(static_cast<double>(scaler.scale()) == steps[i].scale_after);
  }
}

// DeepSpeed with initial scale 256, floor 64, hysteresis 2, no raise: reference and scaler.
void follow_deepspeed(std::int64_t growth_interval, bool consecutive_hysteresis, const std::vector<Step>& steps) {
  LossScalerConfig c = LossScalerConfig::deepspeed();
  c.initial_scale = 256;
  c.min_scale = 64;
  c.growth_interval = growth_interval;
  c.consecutive_hysteresis = consecutive_hysteresis;
  c.raise_at_min_scale = false;
  ref::DeepSpeedLossScalerRef reference(256, 2.0, 0.5, growth_interval, 64, 2, consecutive_hysteresis, false);
  LossScaler scaler(c);
  follow(reference, steps, "reference");
  follow(scaler, steps, "scaler");
}

// The reference of the scaler's own variant, driven in lockstep.
struct AnyRef {
  explicit AnyRef(const LossScalerConfig& c)
      : pytorch(c.initial_scale, c.growth_factor, c.backoff_factor, c.growth_interval),
        megatron(c.initial_scale, c.variant == LossScalerVariant::pytorch ? 1.0 : c.min_scale, c.growth_factor,
                 c.backoff_factor, c.growth_interval, c.hysteresis),
        deepspeed(c.initial_scale, c.growth_factor, c.backoff_factor, c.growth_interval,
                  c.variant == LossScalerVariant::pytorch ? 1.0 : c.min_scale, c.hysteresis, c.consecutive_hysteresis,
                  c.raise_at_min_scale),
        variant(c.variant) {}
  bool update(bool overflow) {
    switch (variant) {
      case LossScalerVariant::pytorch: return pytorch.update(overflow);
      case LossScalerVariant::megatron: return megatron.update(overflow);
      case LossScalerVariant::deepspeed: return deepspeed.update(overflow);
    }
    return false;
  }
  double scale() const {
    return variant == LossScalerVariant::pytorch    ? pytorch.scale()
           : variant == LossScalerVariant::megatron ? megatron.scale()
                                                    : deepspeed.scale();
  }
  ref::PyTorchGradScalerRef pytorch;
  ref::MegatronGradScalerRef megatron;
  ref::DeepSpeedLossScalerRef deepspeed;
  LossScalerVariant variant;
};

}  // namespace

TEST_CASE("loss scaler pytorch: PyTorch's own test trajectory (start 4, interval 2, growth 2, backoff 0.25)") {
  // test_grad_scaling_update_scale: two clean steps grow 4 -> 8, an overflow backs off to 2.
  const std::vector<Step> steps = {{false, 4}, {false, 8}, {true, 2}, {false, 2}, {false, 4}};
  LossScalerConfig c;
  c.initial_scale = 4.0;
  c.growth_interval = 2;
  c.growth_factor = 2.0;
  c.backoff_factor = 0.25;
  ref::PyTorchGradScalerRef reference(4.0, 2.0, 0.25, 2);
  LossScaler scaler(c);
  follow(reference, steps, "reference");
  follow(scaler, steps, "scaler");
}

TEST_CASE("loss scaler pytorch: growth that would overflow FP32 is dropped, backoff has no floor") {
  LossScalerConfig c;
  c.initial_scale = std::ldexp(1.0, 127);
  c.growth_interval = 1;
  LossScaler scaler(c);
  ref::PyTorchGradScalerRef reference(c.initial_scale, 2.0, 0.5, 1);
  const double top = std::ldexp(1.0, 127), under = std::ldexp(1.0, -149);
  follow(scaler, {{false, top}, {false, top}, {true, top / 2}, {false, top}}, "scaler");
  follow(reference, {{false, top}, {false, top}, {true, top / 2}, {false, top}}, "reference");
  // 2^-149 (the smallest subnormal) x 0.5 ties to even: 0. GradScaler has no floor.
  c.initial_scale = under;
  LossScaler tiny(c);
  follow(tiny, {{true, 0.0}}, "scaler");
}

TEST_CASE("loss scaler megatron: hysteresis 2, interval 3, min 256 (DynamicGradScaler)") {
  // From the definition: an overflow uses up one hysteresis; with none left it backs off
  // (never below min); clean steps do not refill it, only a growth does.
  const std::vector<Step> steps = {
      {true, 1024},  // hysteresis 2 -> 1: skipped, scale kept
      {true, 512},   // 1 -> 0: back off
      {true, 256},   // none left: back off again
      {true, 256},   // at the floor
      {false, 256}, {false, 256},
      {false, 512},  // third consecutive clean step: grow, hysteresis refilled to 2
      {true, 512},   // 2 -> 1
      {false, 512},  // a clean step does not refill
      {true, 256},   // 1 -> 0: back off
      {false, 256}, {false, 256}, {false, 512},
  };
  LossScalerConfig c = LossScalerConfig::megatron();
  c.initial_scale = 1024;
  c.min_scale = 256;
  c.growth_interval = 3;
  c.hysteresis = 2;
  ref::MegatronGradScalerRef reference(1024, 256, 2.0, 0.5, 3, 2);
  LossScaler scaler(c);
  follow(reference, steps, "reference");
  follow(scaler, steps, "scaler");
}

TEST_CASE("loss scaler deepspeed: hysteresis 2, window 2, min 64, first growth one step late (DynamicLossScaler)") {
  // stable_interval = clean steps before this one since the last overflow; growth when it is a
  // positive multiple of the window: the 3rd clean step, then the 5th, 7th, ...
  const std::vector<Step> steps = {
      {false, 256}, {false, 256},
      {false, 512},  // stable_interval 2
      {false, 512},
      {false, 1024},  // stable_interval 4
      {true, 1024},   // hysteresis 2 -> 1
      {true, 512},    // at 1: back off
      {false, 512}, {false, 512},
      {false, 1024},  // stable_interval 2 after the overflow: grow, hysteresis refilled
      {true, 1024},   // refilled: 2 -> 1
  };
  follow_deepspeed(/*growth_interval=*/2, /*consecutive_hysteresis=*/false, steps);
}

TEST_CASE("loss scaler deepspeed: consecutive hysteresis refills on every clean step") {
  const std::vector<Step> steps = {
      {true, 256},   // 2 -> 1
      {false, 256},  // refilled to 2
      {true, 256},   // 2 -> 1 again: no backoff, where plain hysteresis would back off here
      {true, 128},
      {true, 64},
      {true, 64},  // floor
  };
  follow_deepspeed(/*growth_interval=*/100, /*consecutive_hysteresis=*/true, steps);
}

TEST_CASE("loss scaler: equals its variant's FP64 reference on 10^5 random overflow sequences") {
  std::mt19937_64 rng(20240614);
  std::uniform_int_distribution<int> variant_pick(0, 2), interval(1, 6), hysteresis(1, 4), length(1, 80), exponent(-140, 127);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::int64_t updates = 0, backoffs_at_floor = 0, growths_dropped = 0, raises = 0;
  for (int sequence = 0; sequence < 100000; ++sequence) {
    LossScalerConfig c;
    c.variant = static_cast<LossScalerVariant>(variant_pick(rng));
    // Powers of two and awkward factors alike: the FP32 rounding of each update is compared.
    c.initial_scale = std::ldexp(unit(rng) < 0.5 ? 1.0 : 1.0 + unit(rng), exponent(rng));
    c.initial_scale = std::min(c.initial_scale, 3.0e38);
    c.growth_factor = unit(rng) < 0.5 ? 2.0 : 1.0 + 3.0 * unit(rng) + 1e-3;
    c.backoff_factor = unit(rng) < 0.5 ? 0.5 : 0.01 + 0.98 * unit(rng);
    c.growth_interval = interval(rng);
    if (c.variant != LossScalerVariant::pytorch) {
      c.hysteresis = hysteresis(rng);
      c.min_scale = c.initial_scale * std::ldexp(1.0, -static_cast<int>(8 * unit(rng)));
      c.min_scale = std::max(c.min_scale, 1e-44);
    }
    if (c.variant == LossScalerVariant::deepspeed) {
      c.consecutive_hysteresis = unit(rng) < 0.5;
      c.raise_at_min_scale = unit(rng) < 0.3;
    }
    REQUIRE_NOTHROW(c.validate());
    LossScaler scaler(c);
    AnyRef reference(c);
    const double p_overflow = unit(rng);
    const int steps = length(rng);
    for (int i = 0; i < steps; ++i) {
      const bool overflow = unit(rng) < p_overflow;
      const double before = reference.scale();
      bool ref_threw = false, scaler_threw = false, ref_skipped = false, scaler_skipped = false;
      try {
        ref_skipped = reference.update(overflow);
      } catch (const ref::DeepSpeedMinScaleError&) {
        ref_threw = true;
      }
      try {
        scaler_skipped = scaler.update(overflow);
      } catch (const LossScaleAtMinimum&) {
        scaler_threw = true;
      }
      ++updates;
      if (ref_threw != scaler_threw || ref_skipped != scaler_skipped || reference.scale() != scaler.scale()) {
        FAIL_CHECK("sequence " << sequence << " step " << i << " " << loss_scaler_variant_name(c.variant)
                               << (overflow ? " overflow" : " clean") << ": reference " << reference.scale()
                               << (ref_threw ? " (raised)" : "") << ", scaler " << scaler.scale()
                               << (scaler_threw ? " (raised)" : "") << "; config initial " << c.initial_scale
                               << " growth " << c.growth_factor << " backoff " << c.backoff_factor << " interval "
                               << c.growth_interval << " hysteresis " << c.hysteresis << " min " << c.min_scale);
        return;
      }
      if (ref_threw) {
        ++raises;
        break;  // the run ends there
      }
      if (overflow && before == reference.scale() && c.variant != LossScalerVariant::pytorch) ++backoffs_at_floor;
      if (!overflow && std::isinf(static_cast<float>(before * c.growth_factor)) && reference.scale() == before) ++growths_dropped;
      if (c.variant == LossScalerVariant::pytorch)
        REQUIRE(static_cast<double>(scaler.inverse_scale()) == reference.pytorch.inverse_scale());
    }
  }
  // The sequences reach every corner the rules have (else the comparison proves less than it says).
  CHECK(updates > 3000000);
  CHECK(backoffs_at_floor > 1000);
  CHECK(growths_dropped > 100);
  CHECK(raises > 1000);
}
