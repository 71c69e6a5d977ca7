#pragma once
// The settings of a dynamic loss scaler, in the three flavours training stacks ship:
//   pytorch   torch.amp.GradScaler: back off on every overflow, grow after growth_interval
//             consecutive clean steps; no floor, no hysteresis.
//   megatron  Megatron-LM's DynamicGradScaler: back off once `hysteresis` overflows have been
//             seen since the last growth, never below min_scale.
//   deepspeed DeepSpeed's DynamicLossScaler: the same hysteresis (optionally refilled by any
//             clean step), min_scale, and optionally an error when an overflow arrives with the
//             scale already at min_scale; growth first after growth_interval + 1 clean steps.
// The exact rules, with the source each follows, are in loss_scaler.cpp and in the independent
// FP64 reference (reference/loss_scaler_ref.hpp).
#include <cstdint>
#include <string_view>

namespace fp8lab {

enum class LossScalerVariant { pytorch, megatron, deepspeed };

const char* loss_scaler_variant_name(LossScalerVariant variant);
// Throws std::invalid_argument naming the choices.
LossScalerVariant parse_loss_scaler_variant(std::string_view text);

struct LossScalerConfig {
  LossScalerVariant variant = LossScalerVariant::pytorch;
  double initial_scale = 65536.0;  // 2^16
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  std::int64_t growth_interval = 2000;  // consecutive clean steps before the scale grows
  // Megatron / DeepSpeed only (the pytorch variant requires the values below as they are):
  std::int64_t hysteresis = 1;          // the n-th overflow since the last growth backs off
  double min_scale = 0.0;               // floor of the backoff; 0 = none (pytorch), > 0 otherwise
  bool consecutive_hysteresis = false;  // deepspeed: every clean step refills the hysteresis
  bool raise_at_min_scale = false;      // deepspeed: an overflow at min_scale ends the run

  // Throws std::invalid_argument "loss scaler: field 'F': ..." for the first bad field:
  // initial_scale not finite, not > 0 or beyond FP32; growth_factor not > 1; backoff_factor
  // outside (0, 1); growth_interval or hysteresis < 1; min_scale negative, not finite or above
  // initial_scale; a field the variant does not have set to anything but its neutral value.
  void validate() const;

  static LossScalerConfig pytorch();    // GradScaler(): 2^16, x2 / x0.5, 2000 steps
  static LossScalerConfig megatron();   // Megatron-LM fp16 defaults: 2^32, min 1, 1000 steps, hysteresis 2
  static LossScalerConfig deepspeed();  // DeepSpeed fp16 defaults: 2^16, min 1, 1000 steps, hysteresis 2,
                                        // raise at min scale (its DynamicLossScaler's default)
};

}  // namespace fp8lab
