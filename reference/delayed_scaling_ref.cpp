#include "reference/delayed_scaling_ref.hpp"

#include <cmath>
#include <limits>

#include "reference/loss_scaler_ref.hpp"

namespace fp8lab::ref {

DelayedScalingRef::DelayedScalingRef(double fmt_max, std::int64_t history_length, bool reduce_max, int margin)
    : scaled_max_(round_to_fp32(fmt_max * std::pow(2.0, -margin))),
      window_(static_cast<std::size_t>(history_length), 0.0),
      reduce_max_(reduce_max) {}

void DelayedScalingRef::update(double amax) {
  window_.pop_back();
  window_.push_front(amax);
  double reduced = amax;
  if (reduce_max_) {
    reduced = 0.0;
    for (double a : window_)
      if (!std::isnan(a) && a > reduced) reduced = a;
  }
  if (!std::isfinite(reduced) || reduced <= 0.0) return;  // zero, inf or NaN: keep the scale
  const double quotient = round_to_fp32(scaled_max_ / reduced);
  scale_ = std::isinf(quotient) ? static_cast<double>(std::numeric_limits<float>::max()) : quotient;
}

}  // namespace fp8lab::ref
