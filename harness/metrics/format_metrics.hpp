#pragma once
// Metrics of a quantized tensor's codes and scales (the formats study,
// harness/study/formats_study.cpp), beside error_metrics.hpp's errors against FP64:
//   - how many blocks (tiles of the scale grid) have their largest element clipped by the
//     element format's saturation;
//   - how two scale rules' quantizations of the same tensor differ, code by code.
//
// Clipping, precisely. For a tile with amax = max |x| > 0, let s = |fl32(amax * encode)| (or
// |fl32(amax / encode)| for the rules that divide) be the largest scaled magnitude the
// quantizer hands to the element codec, with `encode` the tile's own factor (tile_scale of
// kernels/scale_rules.hpp; for nvfp4:4over6 the candidate the block kept). fmt_max is the
// format's largest finite value, ulp = 2^(emax - mantissa_bits) its spacing there, so that
// fmt_max + ulp is the next value of the same significand grid with an unbounded exponent
// (480 for E4M3, whose 0x7F is NaN; 8 for E2M1).
//   over max  s > fmt_max: the codec's saturating branch is taken (for the OCP FLOOR rule on
//             E4M3: amax's significand above 1.75).
//   clipped   the code is smaller in magnitude than round-to-nearest-even would give without
//             the saturation: s > fmt_max + ulp / 2, or s equal to that midpoint when fmt_max's
//             last significand bit is 1, since the tie then goes to the even fmt_max + ulp
//             (E4M3: 448 = 1.110b x 2^8 is even, so 464 rounds to 448 and only s > 464, a
//             significand above 1.8125 under FLOOR, clips; E2M1: 6 = 1.1b x 2^2 is odd, so 7
//             already clips). The definition depends on s alone, so it is the same under
//             stochastic rounding; there every s > fmt_max saturates, which over_max counts
//             (the rules that map amax onto fmt_max through an FP32 reciprocal, fp32 and te
//             among them, put s one FP32 ulp above it in about half their blocks: over max,
//             harmlessly, and not clipped).
// A tile whose largest element does not clip has no clipped element (the scaled magnitudes
// are monotone in |x|), so "the block's maximum clips" = "the block clips anywhere".
// All-zero tiles (padding included) are not counted: the fractions are over nonzero tiles.
#include <cstdint>
#include <span>

#include "kernels/quantization.hpp"

namespace fp8lab {

struct BlockClipCounts {
  std::int64_t blocks = 0;    // tiles with amax > 0
  std::int64_t over_max = 0;  // of those, s > fmt_max
  std::int64_t clipped = 0;   // of those, the saturation made the largest code smaller (above)
  double over_max_fraction() const;  // NaN when blocks == 0
  double clipped_fraction() const;
};

// x is the FP32 tensor `q` was quantized from (rows x cols row-major, finite). Throws
// std::invalid_argument on a size mismatch and std::logic_error when the scale recomputed for
// a tile is not the one q stores (the quantizer and this definition would disagree).
BlockClipCounts block_clip_counts(std::span<const float> x, const QuantizedTensor& q);

// Two quantizations of one tensor with the same format and tile geometry (different scale
// rules, typically), compared element by element and tile by tile.
struct CodeDifference {
  std::int64_t elements = 0;
  std::int64_t codes = 0;   // elements whose code byte differs
  std::int64_t values = 0;  // elements whose dequantized FP32 value differs (+0 and -0 equal)
  std::int64_t tiles = 0;
  std::int64_t scales = 0;  // tiles whose dequantization factor fl32(scale * tensor decode) differs
  double code_fraction() const;  // NaN when there are no elements
  double value_fraction() const;
  double scale_fraction() const;  // NaN when there are no tiles
};

// a_values / b_values: cpu::dequantize of a / b. Throws std::invalid_argument when the two are
// not comparable (shape, format or tile geometry differ, or a value span has the wrong size).
CodeDifference code_difference(const QuantizedTensor& a, std::span<const float> a_values, const QuantizedTensor& b,
                               std::span<const float> b_values);

}  // namespace fp8lab
