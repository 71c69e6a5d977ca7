#pragma once
// What storing a loss-scaled gradient in a narrow format loses (the loss_scaling study): the
// gradient g, held in FP32 as training holds it, is multiplied by the loss scale 2^s (exact
// unless FP32 itself over- or underflows), stored in the format, read back and unscaled by 2^-s
// (exact), and compared with the FP64 gradient.
//
// Formats ("gradient formats"):
//   fp16, bf16          IEEE-style cast, round to nearest even, overflow to +-inf (what a
//                       backward pass in that type produces; the step would then be skipped);
//   e4m3, e5m2          FP8 cast with no scale factor, saturating as the FP8 quantizers do
//                       (cvt.rn.satfinite);
//   e4m3:G, e5m2:G      FP8 with current (online) scaling of granularity G ("tensor",
//                       "tile:1x128", ...): the CPU quantizer (kernels/cpu/quantize.hpp), one
//                       scale sf = amax / fmt_max per tile. The loss scale multiplies amax and
//                       every value alike, so it cancels up to FP32 rounding of sf: these
//                       formats lose the same values at every loss scale.
// Counted over the nonzero values of the FP32 gradient:
//   flushed     a nonzero value that reads back as zero;
//   overflowed  the value handed to the encoder (x for a cast, fl32(x * fl32(1/sf)) when
//               scaled), correctly rounded, exceeds the format's max finite: fp16/bf16 store
//               inf; FP8 saturates to max (the count is taken before saturation clamps it);
//   subnormal   the stored value is a nonzero subnormal of the format (precision lost).
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "kernels/quantization.hpp"

namespace fp8lab {

struct GradientFormat {
  enum class Kind { fp16, bf16, fp8_cast, fp8_scaled };
  Kind kind = Kind::fp16;
  Fp8Format fp8 = Fp8Format::e4m3;           // fp8_cast, fp8_scaled
  Granularity granularity = Granularity::tensor();  // fp8_scaled
  double max_finite() const;
  bool saturates() const { return kind == Kind::fp8_cast || kind == Kind::fp8_scaled; }
};

// "fp16", "bf16", "e4m3", "e5m2", "e4m3:tensor", "e5m2:tile:1x128", ...; throws
// std::invalid_argument saying what is accepted.
GradientFormat parse_gradient_format(std::string_view text);

struct GradientFormatLoss {
  std::int64_t values = 0, nonzero = 0, flushed = 0, overflowed = 0, subnormal = 0;
  double flushed_fraction = 0, overflowed_fraction = 0, subnormal_fraction = 0;  // of nonzero (0 when none)
  double rel_frobenius = 0;         // unscaled stored gradient vs the FP64 gradient (NaN when a value is inf)
  double format_rel_frobenius = 0;  // the same vs the FP32 gradient: the format and scale alone
};

// gradient: the FP32 values (rows x cols, row-major; tiles run along a row); reference: the
// FP64 gradient of the same shape. log2_scale: the loss scale is 2^log2_scale. Throws
// std::invalid_argument on a size mismatch.
GradientFormatLoss gradient_format_loss(std::span<const float> gradient, std::span<const double> reference,
                                        std::int64_t rows, std::int64_t cols, const GradientFormat& format,
                                        int log2_scale);

}  // namespace fp8lab
