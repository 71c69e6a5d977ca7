#pragma once
// The dynamic loss scaler's state machine (host side: one update per optimizer step).
//
// Numerics contract:
//   - the scale is an FP32 value (as the frameworks keep it, in an FP32 tensor);
//   - a new scale is fl32(scale * factor): the product formed exactly (in double) and rounded
//     once, PyTorch's _amp_update_scale rule. A growth that would reach inf is dropped
//     (PyTorch's guard, applied to every variant: an inf scale could never back off again);
//   - unscaling multiplies each gradient element by inverse_scale() = fl32(1 / scale), the
//     reciprocal formed in double and rounded once (GradScaler's scale.double().reciprocal().float()).
// update(found_inf) returns whether this step's optimizer update must be skipped: every
// overflow skips it, in all three variants, whether or not the scale backs off.
#include <cstdint>
#include <stdexcept>

#include "kernels/loss_scaling/loss_scaler_config.hpp"
#include "kernels/loss_scaling/loss_scaler_state.hpp"

namespace fp8lab {

// Thrown by a deepspeed scaler with raise_at_min_scale when an overflow would back off a scale
// already at min_scale (DeepSpeed ends the run there). The scaler's state is left unchanged.
class LossScaleAtMinimum : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class LossScaler {
 public:
  explicit LossScaler(const LossScalerConfig& config);  // validates the config
  // Continues from a saved state (a checkpoint, a results file); throws std::invalid_argument
  // naming the state field when it cannot belong to a scaler with this config.
  LossScaler(const LossScalerConfig& config, const LossScalerState& resume_from);

  float scale() const { return state_.scale; }
  float inverse_scale() const;  // fl32(1 / scale)
  // Records one step; true when its optimizer update must be skipped.
  bool update(bool found_inf);

  const LossScalerState& state() const { return state_; }
  const LossScalerConfig& config() const { return config_; }

 private:
  bool growth_due() const;
  LossScalerConfig config_;
  LossScalerState state_;
};

}  // namespace fp8lab
