#include "kernels/loss_scaling/loss_scaler_config.hpp"

#include <cmath>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

namespace fp8lab {
namespace {

[[noreturn]] void bad_field(const char* field, const std::string& message) {
  throw std::invalid_argument(std::string("loss scaler: field '") + field + "': " + message);
}

template <class T>
std::string shown(T value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// The field exists only in the variants named: any other variant must leave it neutral, so a
// setting that would be silently ignored is an error instead.
void require_neutral(bool neutral, const char* field, LossScalerVariant variant, const char* variants) {
  if (!neutral)
    bad_field(field, std::string("the ") + loss_scaler_variant_name(variant) + " scaler does not have it (only " +
                         variants + ")");
}

}  // namespace

const char* loss_scaler_variant_name(LossScalerVariant variant) {
  switch (variant) {
    case LossScalerVariant::pytorch: return "pytorch";
    case LossScalerVariant::megatron: return "megatron";
    case LossScalerVariant::deepspeed: return "deepspeed";
  }
  return "?";
}

LossScalerVariant parse_loss_scaler_variant(std::string_view text) {
  if (text == "pytorch") return LossScalerVariant::pytorch;
  if (text == "megatron") return LossScalerVariant::megatron;
  if (text == "deepspeed") return LossScalerVariant::deepspeed;
  throw std::invalid_argument("'" + std::string(text) + "' is not one of pytorch, megatron, deepspeed");
}

void LossScalerConfig::validate() const {
  constexpr double kFp32Max = std::numeric_limits<float>::max();
  constexpr double kFp32TrueMin = std::numeric_limits<float>::denorm_min();
  // The scale lives in FP32 (it multiplies an FP32 loss), so it must be a positive FP32 value.
  if (!(std::isfinite(initial_scale) && initial_scale >= kFp32TrueMin && initial_scale <= kFp32Max))
    bad_field("initial_scale", "must be a finite number > 0 that FP32 can hold, got " + shown(initial_scale));
  if (!(std::isfinite(growth_factor) && growth_factor > 1.0))
    bad_field("growth_factor", "must be a finite number > 1, got " + shown(growth_factor));
  if (!(backoff_factor > 0.0 && backoff_factor < 1.0))
    bad_field("backoff_factor", "must lie in (0, 1), got " + shown(backoff_factor));
  if (growth_interval < 1) bad_field("growth_interval", "must be >= 1, got " + shown(growth_interval));
  if (hysteresis < 1) bad_field("hysteresis", "must be >= 1, got " + shown(hysteresis));
  if (!(std::isfinite(min_scale) && min_scale >= 0.0))
    bad_field("min_scale", "must be a finite number >= 0, got " + shown(min_scale));
  if (min_scale > initial_scale)
    bad_field("min_scale", "must not exceed initial_scale (" + shown(initial_scale) + "), got " + shown(min_scale));

  if (variant == LossScalerVariant::pytorch) {
    require_neutral(hysteresis == 1, "hysteresis", variant, "megatron, deepspeed");
    require_neutral(min_scale == 0.0, "min_scale", variant, "megatron, deepspeed");
  } else if (min_scale < kFp32TrueMin) {
    // Megatron asserts min_scale > 0 and DeepSpeed validates it positive: a floor of 0 is
    // PyTorch's behaviour, which has its own variant.
    bad_field("min_scale", std::string("the ") + loss_scaler_variant_name(variant) +
                               " scaler needs a floor > 0 that FP32 can hold, got " + shown(min_scale));
  }
  if (variant != LossScalerVariant::deepspeed) {
    require_neutral(!consecutive_hysteresis, "consecutive_hysteresis", variant, "deepspeed");
    require_neutral(!raise_at_min_scale, "raise_at_min_scale", variant, "deepspeed");
  }
}

LossScalerConfig LossScalerConfig::pytorch() { return {}; }

LossScalerConfig LossScalerConfig::megatron() {
  LossScalerConfig c;
  c.variant = LossScalerVariant::megatron;
  c.initial_scale = 4294967296.0;  // 2^32
  c.growth_interval = 1000;
  c.hysteresis = 2;
  c.min_scale = 1.0;
  return c;
}

LossScalerConfig LossScalerConfig::deepspeed() {
  LossScalerConfig c;
  c.variant = LossScalerVariant::deepspeed;
  c.growth_interval = 1000;
  c.hysteresis = 2;
  c.min_scale = 1.0;
  c.raise_at_min_scale = true;
  return c;
}

}  // namespace fp8lab
