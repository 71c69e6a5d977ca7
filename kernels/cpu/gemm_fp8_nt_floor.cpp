// The fused accumulation model with truncation (rz, the Hopper default) computed by FMAs that
// round toward -inf, plus a count: the micro-tile AVX2 CPUs run for it (AVX-512 CPUs run the
// same steps on 16 lanes: gemm_fp8_nt_floor_wide.cpp; larger F runs them in FP64 lanes:
// gemm_fp8_nt_floor_fp64.cpp). The steps both AVX2 tiles share: gemm_floor_avx2.hpp.
//
// Per output and instruction the model needs (gemm_fp8_nt.cpp's file comment)
//   S = trunc(p 2^(F-E)) + sum_k trunc(x_k),   x_k = a_k b_k / u,   u = 2^(E-F).
// The other micro-tiles spend a multiply by 2^(F-E), a conversion and an integer add on every
// term. Here each term costs one FMA, and a count per 32 outputs corrects floor to trunc:
// 1. Floors. An FP32 value in the binade [2^23 u, 2^24 u) has ulp u. An accumulator started at
//    bias = 1.5 * 2^23 u and updated by acc = fma(a_k, b_k, acc) rounded toward -inf gains
//    exactly floor(x_k) u per term: the FMA forms a_k b_k + acc exactly, and rounding down to
//    a multiple of u is floor. The accumulator starts at bias + trunc(p 2^(F-E)) u instead, so
//    the carried partial rides along; it stays inside the binade while
//    |trunc(p 2^(F-E)) + sum_k floor(x_k)| < 2^22: |p| < 2^(E+1) (exponent(p) <= E) and
//    |x_k| < 4 * 2^F (significands below 2, e_a + e_b <= E), so D terms need (4 D + 2) 2^F <= 2^22.
// 2. The count. trunc(x) = floor(x) + 1 exactly when x < 0 and x is not an integer. A nonzero
//    product is a_k b_k = odd * 2^(lsb_a + lsb_b), so x_k is an integer iff
//    lsb_a + lsb_b >= E - F, and x_k < 0 iff the signs differ. The count
//      N = #{k : sign(a_k) != sign(b_k), lsb_a + lsb_b < E - F}
//    is taken in int8, 32 outputs (one row, one group of 4 panels) per vector, with one wrapping
//    byte add and one compare per product: each code has a signed-lsb byte whose pairwise sums
//    fall at or below T - 64 (T = E - F - 1, clamped) exactly for the products that count
//    (the encoding and its derivation: gemm_packing.hpp; checked exhaustively by
//    tests/unit/floor_count_bytes_test.cpp).
// So S = (acc - bias) / u + N, every step exact, normalized to F fraction bits as in the other
// micro-tiles. acc and bias share a binade with ulp u, so (acc - bias) / u is the integer
// difference of their bit patterns; all bit patterns of powers of two come from exponent
// fields. The result is bit-identical to the other micro-tiles (and to the independent integer
// reference), which tests/reference/gemm_fp8_nt_ref_test.cpp checks.
//
// Ranges (int8 holds E, E - F and the counts): E >= -64 (the floor of gemm_fp8_nt_avx2.cpp, which
// touches only lanes of zero terms) and E <= 32 + log2(K) (|p| is at most the sum of |a b|, each
// below 2^32, and truncation never raises a magnitude), so -85 <= E - F <= 95 for any K < 2^63,
// and N <= D <= 127. The binade exponents 23 + E - F lie in [-62, 118]: normal FP32.
//
// Rounding mode: the FMAs run with MXCSR set to round down, in a function of their own
// (floor_instructions, one call per promotion interval: switching MXCSR is slow) that sets and
// restores it. All its inputs are read from memory after the switch and its results written
// back before the switch back, and no floating-point operation of the caller can move into it;
// inside, every other floating-point operation is exact or truncating (see there), so only the
// FMAs see the mode, and the promotions run rounded to nearest.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/gemm_floor_avx2.hpp"

namespace fp8lab::cpu::detail {
namespace {

using namespace floor_avx2;

// acc[r][q] = bias[r][q] + sum_k a[k][r] b_q[k] over k < depth for kP (1 or 2) panels: 4 kP
// accumulators, named so that they stay in registers. bias and acc are [row][kP][lane]; b0
// and b1 are panels of a group's values, [k][kGroupCols].
template <int kP>
FP8LAB_TARGET_AVX2 inline void fma_rows(const float* at, const float* b0, const float* b1, std::int64_t depth,
                                        const float* bias, float* acc) {
  constexpr int kStride = kP * kPanel;
  __m256 c00 = _mm256_load_ps(bias + 0 * kStride), c10 = _mm256_load_ps(bias + 1 * kStride);
  __m256 c20 = _mm256_load_ps(bias + 2 * kStride), c30 = _mm256_load_ps(bias + 3 * kStride);
  __m256 c01 = c00, c11 = c10, c21 = c20, c31 = c30;
  if constexpr (kP == 2) {
    c01 = _mm256_load_ps(bias + 0 * kStride + kPanel), c11 = _mm256_load_ps(bias + 1 * kStride + kPanel);
    c21 = _mm256_load_ps(bias + 2 * kStride + kPanel), c31 = _mm256_load_ps(bias + 3 * kStride + kPanel);
  }
#pragma GCC unroll 4
  for (std::int64_t k = 0; k < depth; ++k) {
    const __m256 x0 = _mm256_loadu_ps(b0 + k * kGroupCols);
    const __m256 x1 = kP == 2 ? _mm256_loadu_ps(b1 + k * kGroupCols) : x0;
    const float* a = at + k * kRows;
    __m256 s = _mm256_broadcast_ss(a + 0);
    c00 = _mm256_fmadd_ps(s, x0, c00);
    if constexpr (kP == 2) c01 = _mm256_fmadd_ps(s, x1, c01);
    s = _mm256_broadcast_ss(a + 1);
    c10 = _mm256_fmadd_ps(s, x0, c10);
    if constexpr (kP == 2) c11 = _mm256_fmadd_ps(s, x1, c11);
    s = _mm256_broadcast_ss(a + 2);
    c20 = _mm256_fmadd_ps(s, x0, c20);
    if constexpr (kP == 2) c21 = _mm256_fmadd_ps(s, x1, c21);
    s = _mm256_broadcast_ss(a + 3);
    c30 = _mm256_fmadd_ps(s, x0, c30);
    if constexpr (kP == 2) c31 = _mm256_fmadd_ps(s, x1, c31);
  }
  _mm256_store_ps(acc + 0 * kStride, c00), _mm256_store_ps(acc + 1 * kStride, c10);
  _mm256_store_ps(acc + 2 * kStride, c20), _mm256_store_ps(acc + 3 * kStride, c30);
  if constexpr (kP == 2) {
    _mm256_store_ps(acc + 0 * kStride + kPanel, c01), _mm256_store_ps(acc + 1 * kStride + kPanel, c11);
    _mm256_store_ps(acc + 2 * kStride + kPanel, c21), _mm256_store_ps(acc + 3 * kStride + kPanel, c31);
  }
}

// Instructions [first, end) of rows row0..row0+3 and the first kPanels panels of group `group`,
// carrying the partial p ([row][panel][lane]) from one to the next: the rounded-down window (see
// the file comment). Every floating-point operation here other than the FMAs gives the same
// result in any rounding mode: products with powers of two that are exact (the scalings of the
// partial, normal by the ranges above) or below 1 in magnitude before a truncating conversion,
// truncating conversions, and conversions of integers below 2^24.
template <int kPanels>
FP8LAB_TARGET_AVX2 __attribute__((noinline)) void floor_instructions(const FloorProblem& pr, std::int64_t row0,
                                                                     std::int64_t group, std::int64_t first,
                                                                     std::int64_t end, float (*p)[kPanels][kPanel]) {
  constexpr int kLow = std::min(kPanels, 2), kHigh = std::max(kPanels - 2, 1);
  const int F = pr.fraction_bits;
  const std::int64_t depth = pr.depth, tile = row0 / kRows;
  const __m256i keep_mask = _mm256_set1_epi32(static_cast<int>(~((1u << (23 - F)) - 1u)));
  const __m256i scale_exponent = _mm256_set1_epi32(127 + F);
  // Bit patterns of powers of two and of the bias, all from the scale 2^(F-E): the exponent
  // fields of 2^(F-E) and 2^(E-F) add to 254, those of 2^(F-E) and the bias 1.5 * 2^(23+E-F)
  // to 277 (uint32 arithmetic, wrapping in int32 lanes).
  const __m256i unscale_from_scale = _mm256_set1_epi32(254 << 23);
  const __m256i bias_from_scale = _mm256_set1_epi32(static_cast<int>((277u << 23) | 0x400000u));
  const __m256i depth_minus_bias_from_scale = _mm256_sub_epi32(_mm256_set1_epi32(static_cast<int>(depth)), bias_from_scale);

  alignas(32) std::int8_t maxima[kRows][kGroupCols], threshold[kRows][kGroupCols], counts[kRows][kGroupCols];
  alignas(32) std::int32_t scale[kRows][kPanels][kPanel];  // bit patterns of 2^(F-E)
  alignas(32) float start_low[kRows][kLow][kPanel], start_high[kRows][kHigh][kPanel];
  alignas(32) float acc_low[kRows][kLow][kPanel], acc_high[kRows][kHigh][kPanel];

  const unsigned saved = enter_round_down();
  for (std::int64_t i = first; i < end; ++i) {
    const auto [a_at, g_at] = instruction_at(pr, tile, group, i);
    exponent_maxima(&pr.a.tile_exponent[a_at], &pr.b.group_exponent[g_at], depth, maxima);

    // E per output: the products' maximum (at least -64) and exponent(p) (0 and subnormals give
    // -127 here, below the floor); then 2^(F-E), and the accumulator's start, the bias
    // 1.5 * 2^(23+E-F) plus trunc(p 2^(F-E)) ulps (both powers normal, see the file comment),
    // and the count threshold E - F - 1 per column.
    for (std::int64_t r = 0; r < kRows; ++r) {
      __m256i e[kGroupPanels];
      for (int q = 0; q < kGroupPanels; ++q) e[q] = _mm256_setzero_si256();  // columns past the panels: unused
      for (int q = 0; q < kPanels; ++q) {
        const __m256 pv = _mm256_load_ps(p[r][q]);
        e[q] = panel_exponents(pv, maxima[r], q);
        const __m256i s = _mm256_slli_epi32(_mm256_sub_epi32(scale_exponent, e[q]), 23);
        _mm256_store_si256(reinterpret_cast<__m256i*>(scale[r][q]), s);
        const __m256i truncated_p = _mm256_cvttps_epi32(_mm256_mul_ps(pv, _mm256_castsi256_ps(s)));
        _mm256_store_si256(reinterpret_cast<__m256i*>(q < 2 ? start_low[r][q] : start_high[r][q - 2]),
                           _mm256_add_epi32(_mm256_sub_epi32(bias_from_scale, s), truncated_p));
      }
      // count_threshold_byte(E - F - 1) (gemm_packing.hpp) in int8: E lies in [-64, 95] (the
      // ranges above), so neither the narrowing nor the subtraction saturates.
      store_count_thresholds(e, F, threshold[r]);
    }

    truncation_counts(&pr.a.tile_lsb[a_at], &pr.b.group_lsb[g_at], depth, threshold, counts);
    const float* b[kPanels];
    for (int q = 0; q < kPanels; ++q) b[q] = &pr.b.value[g_at + static_cast<std::size_t>(q * kPanel)];
    fma_rows<kLow>(&pr.a.tile_value[a_at], b[0], b[kLow - 1], depth, &start_low[0][0][0], &acc_low[0][0][0]);
    if constexpr (kPanels > 2)
      fma_rows<kPanels - 2>(&pr.a.tile_value[a_at], b[2], b[kPanels - 1], depth, &start_high[0][0][0], &acc_high[0][0][0]);

    // S - N = trunc(p 2^(F-E)) + sum_k floor(x_k) is the accumulator's distance from the bias in
    // ulps (same binade), so an integer difference of bit patterns; N = depth + counts. S < 2^24
    // converts to FP32 exactly; keep F fraction bits of the sign-magnitude pattern (truncation)
    // and scale by 2^(E-F).
    for (std::int64_t r = 0; r < kRows; ++r)
      for (int q = 0; q < kPanels; ++q) {
        const __m256i acc = _mm256_castps_si256(_mm256_load_ps(q < 2 ? acc_low[r][q] : acc_high[r][q - 2]));
        const __m256i s = _mm256_load_si256(reinterpret_cast<const __m256i*>(scale[r][q]));
        const __m256i sum = _mm256_add_epi32(_mm256_add_epi32(acc, s),
                                             _mm256_add_epi32(depth_minus_bias_from_scale, widen_panel(counts[r], q)));
        const __m256i bits = _mm256_and_si256(_mm256_castps_si256(_mm256_cvtepi32_ps(sum)), keep_mask);
        const __m256i unscale = _mm256_sub_epi32(unscale_from_scale, s);
        _mm256_store_ps(p[r][q], _mm256_mul_ps(_mm256_castsi256_ps(bits), _mm256_castsi256_ps(unscale)));
      }
  }
  load_mxcsr(saved);
}

}  // namespace

bool floor_tile_holds(const AccumulationModel& m) {
  return m.kind == AccumulationModel::Kind::fused && m.rounding == AccumulationModel::Rounding::rz &&
         m.fraction_bits >= 0 && m.fraction_bits <= 21 && m.depth >= 1 && m.depth <= 127 &&
         (4.0 * static_cast<double>(m.depth) + 2.0) * static_cast<double>(1 << m.fraction_bits) <= static_cast<double>(1 << 22);
}

static FP8LAB_TARGET_AVX2 void tile_floor_avx2(const FloorProblem& pr, std::int64_t row0, std::int64_t group, std::int64_t panels) {
  switch (panels) {
    case 1: return floor_tile<1, floor_instructions<1>>(pr, row0, group);
    case 2: return floor_tile<2, floor_instructions<2>>(pr, row0, group);
    case 3: return floor_tile<3, floor_instructions<3>>(pr, row0, group);
    default: return floor_tile<4, floor_instructions<4>>(pr, row0, group);
  }
}

void gemm_floor(const PackedA& a, const PackedB& b, const GemmPlan& plan, const GemmConfig& config, std::int64_t depth,
                int threads, FloorTile tile, float* out) {
  const FloorProblem pr{a, b, plan, config.accumulation.fraction_bits, depth, plan.padded_k / depth, out,
                        a.rows, b.cols, config.output == OutputType::bf16};
  // Tasks of 16 rows x 4 groups: a group's B slice is reused by the task's 4 row tiles, and a
  // small GEMM (a 64-row Wgrad) still has a task for each thread.
  constexpr std::int64_t kRowChunk = 16, kGroupChunk = 4;
  const std::int64_t row_chunks = (a.padded_rows + kRowChunk - 1) / kRowChunk;
  const std::int64_t group_chunks = (b.groups + kGroupChunk - 1) / kGroupChunk;
#pragma omp parallel for schedule(dynamic) num_threads(threads)
  for (std::int64_t task = 0; task < row_chunks * group_chunks; ++task) {
    const std::int64_t rc = task / group_chunks, gc = task % group_chunks;
    for (std::int64_t group = gc * kGroupChunk; group < std::min(b.groups, (gc + 1) * kGroupChunk); ++group)
      for (std::int64_t r = rc * kRowChunk; r < std::min(a.padded_rows, (rc + 1) * kRowChunk); r += kRows)
        switch (tile) {
          case FloorTile::avx2: tile_floor_avx2(pr, r, group, std::min(kGroupPanels, b.panels - group * kGroupPanels)); break;
          case FloorTile::wide_avx2: tile_floor_wide_avx2(pr, r, group); break;
          case FloorTile::wide_avx512: tile_floor_wide_avx512(pr, r, group); break;
          case FloorTile::fp32_wide_avx2: tile_fp32_wide_avx2(pr, r, group); break;
          case FloorTile::fp32_wide_avx512: tile_fp32_wide_avx512(pr, r, group); break;
          case FloorTile::fp64_avx2: tile_floor_fp64_avx2(pr, r, group, std::min(kGroupPanels, b.panels - group * kGroupPanels)); break;
        }
  }
}

}  // namespace fp8lab::cpu::detail
