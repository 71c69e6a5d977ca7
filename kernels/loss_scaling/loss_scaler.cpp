#include "kernels/loss_scaling/loss_scaler.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace fp8lab {
namespace {

// fl32(scale * factor): the double product of an FP32 value and a double factor, rounded once.
float scaled(float scale, double factor) { return static_cast<float>(static_cast<double>(scale) * factor); }

LossScalerState initial_state(const LossScalerConfig& config) {
  LossScalerState s;
  s.variant = config.variant;
  s.scale = static_cast<float>(config.initial_scale);
  s.tolerated_overflows = config.hysteresis - 1;
  return s;
}

}  // namespace

LossScaler::LossScaler(const LossScalerConfig& config) : config_(config) {
  config_.validate();
  state_ = initial_state(config_);
}

LossScaler::LossScaler(const LossScalerConfig& config, const LossScalerState& resume_from)
    : config_(config), state_(resume_from) {
  config_.validate();
  auto bad = [](const char* field, const std::string& message) {
    throw std::invalid_argument(std::string("loss scaler state: field '") + field + "': " + message);
  };
  if (state_.variant != config_.variant)
    bad("variant", std::string("the state is a ") + loss_scaler_variant_name(state_.variant) +
                       " scaler's, the config asks for " + loss_scaler_variant_name(config_.variant));
  if (!(std::isfinite(state_.scale) && state_.scale >= 0.0f)) bad("scale", "must be a finite number >= 0");
  if (state_.tolerated_overflows < 0 || state_.tolerated_overflows > config_.hysteresis - 1)
    bad("tolerated_overflows", "must lie in [0, hysteresis - 1 = " + std::to_string(config_.hysteresis - 1) + "]");
  if (state_.clean_steps < 0 || state_.steps < 0) bad(state_.steps < 0 ? "steps" : "clean_steps", "must be >= 0");
}

float LossScaler::inverse_scale() const { return static_cast<float>(1.0 / static_cast<double>(state_.scale)); }

// PyTorch (_amp_update_scale) and Megatron (DynamicGradScaler) grow on every growth_interval-th
// consecutive clean step. DeepSpeed (DynamicLossScaler.update_scale) grows when the number of
// clean steps *before* this one since the last overflow is a positive multiple of the
// interval: the first growth comes one clean step later, then every interval.
bool LossScaler::growth_due() const {
  const std::int64_t counted = config_.variant == LossScalerVariant::deepspeed ? state_.clean_steps - 1 : state_.clean_steps;
  return counted > 0 && counted % config_.growth_interval == 0;
}

bool LossScaler::update(bool found_inf) {
  const std::int64_t full_tolerance = config_.hysteresis - 1;
  if (found_inf) {
    if (state_.tolerated_overflows > 0) {
      --state_.tolerated_overflows;  // hysteresis: this overflow skips the step but keeps the scale
    } else {
      const float floor = static_cast<float>(config_.min_scale);
      if (config_.raise_at_min_scale && state_.scale == floor)
        throw LossScaleAtMinimum("loss scaler: overflow at step " + std::to_string(state_.steps) +
                                 " with the scale already at min_scale " + std::to_string(floor) +
                                 " (raise_at_min_scale): the run cannot continue");
      state_.scale = std::max(scaled(state_.scale, config_.backoff_factor), floor);
    }
    state_.clean_steps = 0;
  } else {
    ++state_.clean_steps;
    if (config_.consecutive_hysteresis) state_.tolerated_overflows = full_tolerance;
    if (growth_due()) {
      const float grown = scaled(state_.scale, config_.growth_factor);
      if (std::isfinite(grown)) state_.scale = grown;
      state_.tolerated_overflows = full_tolerance;  // Megatron and DeepSpeed refill on growth
    }
  }
  ++state_.steps;
  return found_inf;
}

}  // namespace fp8lab
