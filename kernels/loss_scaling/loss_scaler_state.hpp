#pragma once
// What a loss scaler must carry across a checkpoint so a resumed run continues the same scale
// trajectory, and its text form for a results file's attribute or a checkpoint's metadata:
//   "variant=megatron;scale=65536;clean_steps=12;tolerated_overflows=1;steps=340"
// The scale is written in the shortest decimal that reads back as the same FP32 value.
#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/loss_scaling/loss_scaler_config.hpp"

namespace fp8lab {

struct LossScalerState {
  LossScalerVariant variant = LossScalerVariant::pytorch;
  float scale = 65536.0f;
  std::int64_t clean_steps = 0;          // consecutive steps without inf/NaN since the last overflow
  std::int64_t tolerated_overflows = 0;  // overflows that will still not back off (hysteresis - 1 when full)
  std::int64_t steps = 0;                // updates so far

  std::string to_string() const;
  // Throws std::invalid_argument "loss scaler state: field 'F': ..." for a missing, repeated,
  // unknown or malformed field.
  static LossScalerState from_string(std::string_view text);
  bool operator==(const LossScalerState&) const = default;
};

}  // namespace fp8lab
