#pragma once
// FP8 per-tensor delayed scaling from an amax history, as Transformer Engine's DelayedScaling
// recipe defines it (transformer_engine/common/recipe/delayed_scaling.cu, amax_and_scale_update):
// the per-tensor counterpart of loss scaling, next to the current (online) scaling of
// DeepSeek-V3 that kernels/quantization.hpp implements.
//
// Numerics contract (the rules follow TE's kernel):
//   history   the last history_length amaxes, most recent first, zeros before the first step;
//   amax      reduction max: the largest entry (a NaN entry is passed over, as fmaxf does);
//             reduction most_recent: the amax just recorded;
//   scale     fl32(scaled_max / amax) with scaled_max = fl32(fmt_max * 2^-margin), when amax is
//             finite and > 0; otherwise (zero, inf, NaN) the previous scale is kept; a quotient
//             that overflows FP32 becomes FP32's max;
//   the scale multiplies before the cast (q = cast(x * scale)) and starts at 1;
//   scale_inverse = fl32(1 / scale) is the dequantization factor (fp8lab's tile scale sf).
// One quantization uses scale(); afterwards update(amax of what it quantized) rolls the window
// and sets the scale for the next step (hence "delayed").
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/quantization.hpp"

namespace fp8lab {

enum class AmaxReduction { max, most_recent };

const char* amax_reduction_name(AmaxReduction r);
AmaxReduction parse_amax_reduction(std::string_view text);  // throws std::invalid_argument naming the choices

struct DelayedScalingConfig {
  Fp8Format format = Fp8Format::e4m3;
  std::int64_t history_length = 1024;  // TE's default amax_history_len
  AmaxReduction reduction = AmaxReduction::max;
  int margin = 0;                      // the scale is lowered by 2^margin, headroom for growth

  // Throws std::invalid_argument "delayed scaling: field 'F': ..." (history_length < 1 or above
  // 2^20; margin outside [0, 64]).
  void validate() const;
};

class DelayedScaler {
 public:
  explicit DelayedScaler(const DelayedScalingConfig& config);  // validates
  // Continues from a saved state (a checkpoint): history most recent first, as history() gives
  // it. Throws std::invalid_argument "delayed scaling: field 'F': ..." when the history is not
  // history_length long or the scale is not finite and > 0.
  DelayedScaler(const DelayedScalingConfig& config, std::span<const float> history, float scale);
  float scale() const { return scale_; }
  float scale_inverse() const;
  const DelayedScalingConfig& config() const { return config_; }  // fl32(1 / scale)
  void update(float amax);
  std::vector<float> history() const;  // most recent first, history_length entries

 private:
  DelayedScalingConfig config_;
  float scaled_max_;
  std::vector<float> ring_;  // ring_[head_] is the most recent amax
  std::size_t head_ = 0;
  float scale_ = 1.0f;
};

}  // namespace fp8lab
