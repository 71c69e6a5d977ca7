#pragma once
// `nvfp4:4over6`: Transformer Engine's "4over6" NVFP4 block scaling (Cook et al., arXiv
// 2512.02010; TE common/cast/nvfp4/quantize_4over6_nvfp4.cuh, NVTE_NVFP4_4OVER6), with TE's
// defaults: MAE error, global E4M3 bound 256 (NVTE_NVFP4_4OVER6_E4M3_USE_256), the input-domain
// error path (NVTE_NVFP4_4OVER6_ERR_USE_FAST_MATH=0). Host+device arithmetic, as the other rules.
//
// Per tensor: S_enc = fminf(fl32(256 * 6 / amax), FLT_MAX), 1 when amax = 0 or S_enc = 0 (the
// bound 256 instead of 448 leaves the map-to-4 scale 1.5x of headroom); decode factor fl32(1 / S_enc).
// Per block (1x16, or 16x16 for TE's 2-D weights), with block amax a:
//   base = fl32(fl32(a / 6) * S_enc)
//   map6: s6 = E4M3(fminf(base, 448));                 map4: s4 = E4M3(fminf(fl32(base * 1.5), 448))
//   enc  = fminf(fl32(1 / fl32(s * fl32(1 / S_enc))), FLT_MAX) for each, q = E2M1(fl32(x * enc))
//   error of a candidate, in FP32, per element in row-major order within each block row:
//     val = fl32(fl32(fl32(E2M1 value of q * s) * tensor amax) / 1536); e += |fl32(val - x)|
//   starting from e = 0; a 16x16 block adds its 16 row sums as TE's warp reduction does:
//   r_i += r_(i+8), then r_i += r_(i+4), r_i += r_(i+2), r_0 + r_1 (i counting rows in the block).
//   The block keeps map4 when e4 < e6 (a tie keeps map6); its stored scale is that candidate's s.
// Only tile:1x16 and block:16x16 are served (TE's blocks) and only round to nearest (TE refuses
// stochastic rounding with 4over6); ragged tiles add zeros, which add nothing to either error.
#include "kernels/formats/element_format.hpp"
#include "kernels/formats/float_formats.hpp"
#include "kernels/formats/host_device.hpp"
#include "kernels/scale_rules.hpp"

namespace fp8lab::four_over_six {

// The per-tensor scale and the two candidates are scale_rules.hpp's (tensor_scale,
// scale_detail::nvfp4_4over6_candidates); here is what needs the elements.
inline constexpr float kErrorDenominator = 6.0f * 256.0f;  // 1536 = E2M1 max x the E4M3 bound
inline constexpr int kBlock = 16;

// One element's term of a candidate's error (MAE): |fl32(val - x)|.
FP8LAB_HD constexpr float error_term(float x, std::uint32_t code, float block_scale, float tensor_amax) {
  const float val = ((decode<E2M1>(code) * block_scale) * tensor_amax) / kErrorDenominator;
  const float diff = val - x;
  return diff < 0.0f ? -diff : diff;
}

// TE's reduction of a 16x16 block's 16 row errors (row_errors[i] for row i of the block).
FP8LAB_HD constexpr float sum_rows(float (&row_errors)[kBlock]) {
  for (int offset = kBlock / 2; offset > 0; offset /= 2)
    for (int i = 0; i < offset; ++i) row_errors[i] += row_errors[i + offset];
  return row_errors[0];
}

}  // namespace fp8lab::four_over_six
