#include "reference/loss_scaler_ref.hpp"

#include <algorithm>
#include <cmath>

namespace fp8lab::ref {
namespace {

// fp8lab's addition to every variant: keep the old scale when the grown one is not finite.
double grown_or_kept(double scale, double growth_factor) {
  const double grown = round_to_fp32(scale * growth_factor);
  return std::isfinite(grown) ? grown : scale;
}

}  // namespace

double round_to_fp32(double x) { return static_cast<double>(static_cast<float>(x)); }

// --- PyTorch: ATen _amp_update_scale_cpu_kernel / _amp_update_scale_cuda_kernel ---------------
PyTorchGradScalerRef::PyTorchGradScalerRef(double init_scale, double growth_factor, double backoff_factor,
                                           std::int64_t growth_interval)
    : scale_(round_to_fp32(init_scale)), growth_factor_(growth_factor), backoff_factor_(backoff_factor),
      growth_interval_(growth_interval) {}

bool PyTorchGradScalerRef::update(bool found_inf) {
  if (found_inf) {  // scale *= backoff, tracker reset
    scale_ = round_to_fp32(scale_ * backoff_factor_);
    growth_tracker_ = 0;
    return true;
  }
  const std::int64_t successful = growth_tracker_ + 1;  // this clean step counted first
  if (successful == growth_interval_) {
    scale_ = grown_or_kept(scale_, growth_factor_);  // PyTorch's own "do not grow past fp32 bounds"
    growth_tracker_ = 0;                             // reset even when the growth was dropped
  } else {
    growth_tracker_ = successful;
  }
  return false;
}

// GradScaler.unscale_: inv_scale = self._scale.double().reciprocal().float()
double PyTorchGradScalerRef::inverse_scale() const { return round_to_fp32(1.0 / scale_); }

// --- Megatron-LM: DynamicGradScaler.update -----------------------------------------------------
MegatronGradScalerRef::MegatronGradScalerRef(double initial_scale, double min_scale, double growth_factor,
                                             double backoff_factor, std::int64_t growth_interval,
                                             std::int64_t hysteresis)
    : scale_(round_to_fp32(initial_scale)), min_scale_(round_to_fp32(min_scale)), growth_factor_(growth_factor),
      backoff_factor_(backoff_factor), growth_interval_(growth_interval), hysteresis_(hysteresis),
      hysteresis_tracker_(hysteresis) {}

bool MegatronGradScalerRef::update(bool found_inf) {
  if (found_inf) {
    // Growth tracker to 0, one hysteresis used up; once none is left, every further overflow
    // backs off (the tracker is refilled only by a growth, not by clean steps).
    growth_tracker_ = 0;
    hysteresis_tracker_ -= 1;
    if (hysteresis_tracker_ <= 0) scale_ = std::max(round_to_fp32(scale_ * backoff_factor_), min_scale_);
    return true;  // MegatronOptimizer.step returns without updating when found_inf
  }
  growth_tracker_ += 1;
  if (growth_tracker_ == growth_interval_) {
    growth_tracker_ = 0;
    hysteresis_tracker_ = hysteresis_;
    scale_ = grown_or_kept(scale_, growth_factor_);
  }
  return false;
}

// --- DeepSpeed: DynamicLossScaler.update_scale -------------------------------------------------
DeepSpeedLossScalerRef::DeepSpeedLossScalerRef(double init_scale, double growth_factor, double backoff_factor,
                                               std::int64_t scale_window, double min_scale,
                                               std::int64_t delayed_shift, bool consecutive_hysteresis,
                                               bool raise_error_at_min_scale)
    : cur_scale_(round_to_fp32(init_scale)), growth_factor_(growth_factor), backoff_factor_(backoff_factor),
      min_scale_(round_to_fp32(min_scale)), scale_window_(scale_window), delayed_shift_(delayed_shift),
      cur_hysteresis_(delayed_shift), consecutive_hysteresis_(consecutive_hysteresis),
      raise_error_at_min_scale_(raise_error_at_min_scale) {}

bool DeepSpeedLossScalerRef::update(bool overflow) {
  if (overflow) {
    if (delayed_shift_ == 1 || cur_hysteresis_ == 1) {
      if (cur_scale_ == min_scale_ && raise_error_at_min_scale_)
        throw DeepSpeedMinScaleError("Current loss scale already at minimum - cannot decrease scale anymore");
      cur_scale_ = std::max(round_to_fp32(cur_scale_ * backoff_factor_), min_scale_);
    } else {
      cur_hysteresis_ -= 1;  // "Skipping step ... Reducing hysteresis"
    }
    last_overflow_iter_ = cur_iter_;
  } else {
    if (consecutive_hysteresis_) cur_hysteresis_ = delayed_shift_;
    const std::int64_t stable_interval = (cur_iter_ - last_overflow_iter_) - 1;
    if (stable_interval > 0 && stable_interval % scale_window_ == 0) {
      if (!consecutive_hysteresis_) cur_hysteresis_ = delayed_shift_;
      cur_scale_ = grown_or_kept(cur_scale_, growth_factor_);
    }
  }
  cur_iter_ += 1;
  return overflow;  // FP16_Optimizer skips the step on every overflow
}

}  // namespace fp8lab::ref
