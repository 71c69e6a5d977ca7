#pragma once
// FP64 references of the three dynamic loss scalers, each written from its framework's own
// definition, with that framework's bookkeeping (sharing no code or state layout with
// kernels/loss_scaling, which folds all three into one counter scheme):
//   PyTorchGradScalerRef     torch.amp.GradScaler / ATen _amp_update_scale: a growth tracker
//                            of consecutive clean steps, reset on overflow and on growth.
//   MegatronGradScalerRef    Megatron-LM megatron/core/optimizer/grad_scaler.py
//                            DynamicGradScaler: growth tracker + hysteresis tracker.
//   DeepSpeedLossScalerRef   DeepSpeed deepspeed/runtime/fp16/loss_scaler.py
//                            DynamicLossScaler: iteration counter, last overflow iteration,
//                            current hysteresis.
// The state is kept in double; the one place FP32 enters is the definition itself: the
// frameworks hold the scale in an FP32 tensor, so each new scale is rounded to FP32
// (round_to_fp32). fp8lab adds one rule to all three: a growth whose FP32 result is inf is
// dropped (PyTorch's guard; Megatron and DeepSpeed would store inf and never recover).
// update(found_inf) returns true when the step is skipped (always on overflow, in all three).
#include <cstdint>
#include <stdexcept>

namespace fp8lab::ref {

double round_to_fp32(double x);  // the nearest FP32 value, ties to even (inf beyond FP32's range)

class PyTorchGradScalerRef {
 public:
  PyTorchGradScalerRef(double init_scale, double growth_factor, double backoff_factor, std::int64_t growth_interval);
  bool update(bool found_inf);
  double scale() const { return scale_; }
  double inverse_scale() const;  // round_to_fp32(1 / scale): what unscale_ multiplies by

 private:
  double scale_, growth_factor_, backoff_factor_;
  std::int64_t growth_interval_, growth_tracker_ = 0;
};

class MegatronGradScalerRef {
 public:
  MegatronGradScalerRef(double initial_scale, double min_scale, double growth_factor, double backoff_factor,
                        std::int64_t growth_interval, std::int64_t hysteresis);
  bool update(bool found_inf);
  double scale() const { return scale_; }

 private:
  double scale_, min_scale_, growth_factor_, backoff_factor_;
  std::int64_t growth_interval_, hysteresis_, growth_tracker_ = 0, hysteresis_tracker_;
};

// DeepSpeed's raise_error_at_min_scale: thrown before anything changes.
class DeepSpeedMinScaleError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// DeepSpeed has a single scale_factor (growth x f, backoff / f); the backoff is taken as a
// separate factor here so every fp8lab config can be checked (backoff = 1 / f gives DeepSpeed).
class DeepSpeedLossScalerRef {
 public:
  DeepSpeedLossScalerRef(double init_scale, double growth_factor, double backoff_factor, std::int64_t scale_window,
                         double min_scale, std::int64_t delayed_shift, bool consecutive_hysteresis,
                         bool raise_error_at_min_scale);
  bool update(bool overflow);
  double scale() const { return cur_scale_; }

 private:
  double cur_scale_, growth_factor_, backoff_factor_, min_scale_;
  std::int64_t scale_window_, delayed_shift_, cur_hysteresis_, cur_iter_ = 0, last_overflow_iter_ = -1;
  bool consecutive_hysteresis_, raise_error_at_min_scale_;
};

}  // namespace fp8lab::ref
