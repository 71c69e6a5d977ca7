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
#include <cstdint>

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

// One candidate's error over a block, summed in TE's order (each row from left to right, then a
// 2-D block's rows by the warp reduction; a 1-D block is its one row). The codes are not kept:
// the kept candidate is encoded again (encode is a pure function of the value and the scale),
// so a GPU thread holds 16 floats of row sums rather than two 256-byte code arrays in local
// memory.
FP8LAB_HD inline float candidate_error(const float* x, std::int64_t ld, std::int64_t r0, std::int64_t r1, std::int64_t c0,
                                       std::int64_t c1, TileScale s, float tensor_amax) {
  float row_errors[kBlock] = {};
  for (std::int64_t r = r0; r < r1; ++r) {
    float e = 0.0f;
    for (std::int64_t c = c0; c < c1; ++c) {
      const float v = x[r * ld + c];
      e += error_term(v, encode_e2m1_by_quantum_add(v * s.encode), s.decode, tensor_amax);
    }
    row_errors[r - r0] = e;
  }
  return sum_rows(row_errors);  // absent rows add +0: a 1x16 block's sum is its row's
}

// Quantizes rows [r0, r1) x cols [c0, c1) of x (row stride ld) as one 4over6 block of amax
// `block_amax` into codes (same stride): both candidates' errors, then the codes of the one
// with the smaller error; returns its E4M3 block scale (the stored decode scale).
// r1 - r0 <= 16, c1 - c0 <= 16. The CPU quantizer and the CUDA one (a thread per block) both
// run this function.
FP8LAB_HD inline float quantize_block(const float* x, std::uint8_t* codes, std::int64_t ld, std::int64_t r0, std::int64_t r1,
                                      std::int64_t c0, std::int64_t c1, float block_amax, float tensor_amax,
                                      TensorScale tensor_scale) {
  const scale_detail::FourOverSixCandidates s =
      scale_detail::nvfp4_4over6_candidates(block_amax, element_traits_of<E2M1>(), tensor_scale);
  const float error4 = candidate_error(x, ld, r0, r1, c0, c1, s.map4, tensor_amax);
  const float error6 = candidate_error(x, ld, r0, r1, c0, c1, s.map6, tensor_amax);
  const TileScale kept = error4 < error6 ? s.map4 : s.map6;  // a tie (or a NaN) keeps map6, as TE
  for (std::int64_t r = r0; r < r1; ++r)
    for (std::int64_t c = c0; c < c1; ++c) {
      const float v = x[r * ld + c];
      codes[r * ld + c] = static_cast<std::uint8_t>(encode_e2m1_by_quantum_add(v * kept.encode));
    }
  return kept.decode;
}

}  // namespace fp8lab::four_over_six
