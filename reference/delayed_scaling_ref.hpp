#pragma once
// FP64 reference of Transformer Engine's delayed scaling (common/recipe/delayed_scaling.cu,
// amax_and_scale_update), from its definition:
//   window     the last `history_length` amaxes recorded (zeros before the first), oldest dropped;
//   amax       max over the window, NaN entries passed over (fmaxf), or the most recent one;
//   scale      when amax is finite and > 0: round_to_fp32(scaled_max / amax), scaled_max =
//              round_to_fp32(fmt_max * 2^-margin); else the previous scale (start: 1); an inf
//              quotient becomes FP32's largest finite value.
// The quotient is formed in FP64 and rounded once to FP32: for FP32 operands that equals the
// correctly rounded FP32 division (53 >= 2 * 24 + 2, so the double rounding is innocuous).
#include <cstdint>
#include <deque>

namespace fp8lab::ref {

class DelayedScalingRef {
 public:
  DelayedScalingRef(double fmt_max, std::int64_t history_length, bool reduce_max, int margin);
  void update(double amax);
  double scale() const { return scale_; }

 private:
  double scaled_max_;
  std::deque<double> window_;  // front: most recent
  bool reduce_max_;
  double scale_ = 1.0;
};

}  // namespace fp8lab::ref
