// The fused accumulation model with truncation (rz) for fraction widths past the FP32 micro-tiles'
// (Blackwell's accumulator: F = 25, D = 32): the floor-and-count trick of gemm_fp8_nt_floor.cpp in
// FP64 lanes, 4 per AVX2 vector (what AVX-512 CPUs run too).
//
// Why a tile of its own: the FP32 floor micro-tile needs (4 D + 2) 2^F <= 2^22 (F <= 14 at D = 32)
// and the conversion micro-tiles (4 D + 2) 2^F <= 2^24, F <= 23; past them the scalar definition
// (tile_generic) ran, about 13x slower than the Hopper model's path.
//
// Per output and instruction the model needs (gemm_fp8_nt.cpp's file comment)
//   S = trunc(p 2^(F-E)) + sum_k trunc(x_k),   x_k = a_k b_k / u,   u = 2^(E-F),
// computed as in gemm_fp8_nt_floor.cpp, step for step, with FP64's wider binade:
// 1. Floors. An FP64 value in [2^52 u, 2^53 u) has ulp u. The accumulator starts at
//    bias + trunc(p 2^(F-E)) u, bias = 1.5 * 2^52 u, and acc = fma(a_k, b_k, acc) rounded toward
//    -inf gains exactly floor(x_k) u per term (the FMA rounds the exact a_k b_k + acc once, down to
//    a multiple of u) while acc + x_k stays in the binade, i.e. while the running sum in units of
//    u stays below 2^51 in magnitude: |trunc(p 2^(F-E))| < 2^(F+1) (|p| < 2^(E+1)), and
//    |x_k| < 4 * 2^F (significands below 2, e_a + e_b <= E), so floor(x_k) >= -4 * 2^F (an
//    integer above -4 * 2^F - 1); D terms give less than (4 D + 2) 2^F, so the condition is
//    (4 D + 2) 2^F <= 2^51. The same bound holds for S itself.
// 2. The count N of products with trunc(x_k) = floor(x_k) + 1: integers only, the same bytes,
//    thresholds and int8 steps as the FP32 tile (gemm_floor_avx2.hpp: any F <= 126).
// 3. The result. acc's bit pattern plus N is the pattern of bias + S u (same binade, |S| < 2^51);
//    minus the bias, S u exactly (two multiples of u, the difference below 2^51 u). Keeping
//    min(F, 23) fraction bits (the normalization, truncating) clears the low 52 - min(F, 23)
//    bits of that FP64 pattern (sign-magnitude, so toward zero); what is left has at most 24
//    significant bits and lies in FP32's normal range (below), so the conversion to FP32 is exact.
// Every step is exact, so the result is bit-identical to the other micro-tiles and to the integer
// reference (tests/reference/gemm_fp8_nt_floor_fp64_ref_test.cpp).
//
// Ranges. E = max(exponent(p), max_k e_a + e_b, -64) as in the FP32 tile, in [-64, 95]. The floor
// -64 changes nothing where every term is zero, and here no nonzero term lies below it: a nonzero
// product has e_a + e_b >= -28 (gemm_fp8_nt.cpp), and a nonzero p is a multiple of 2^(E' - F) for
// the E' >= -28 of an earlier instruction with a nonzero product (instructions without one pass
// p through unchanged: it already has at most F + 1 significant bits), so exponent(p) >= -28 - F,
// which is >= -64 for F <= 36. So this tile holds
//   0 <= F <= 36,   1 <= D <= 127 (N in int8),   (4 D + 2) 2^F <= 2^51 (implied by the first two).
// The powers of two: 2^(F-E) in [2^-95, 2^100], u = 2^(E-F) and the bias 1.5 * 2^(52+E-F) with
// exponents in [-100, 147]: normal FP64. A nonzero S u is at least u >= 2^(-28-2F) >= 2^-100
// (E >= -28 - F where S is nonzero, by the above) and below 2^95: normal FP32.
//
// Rounding mode: as in gemm_fp8_nt_floor.cpp, the FMAs run with MXCSR set to round down in a
// window of their own (floor_instructions), and every other floating-point operation in it is
// exact (conversions FP32 -> FP64 and back of representable values, products with powers of two,
// the fma building the start, the subtraction of step 3) or rounds by its own immediate (the
// truncation of p 2^(F-E)). The one trace of the mode: acc - bias with acc = bias (S = 0) is -0
// when rounding down, where the other tiles carry +0. Nothing can tell them apart: p = -0 starts
// the next instruction at the bias as +0 does (its exponent field is 0 either way), and a
// promotion adds -0 * s (s > 0) to an accumulator that is never -0 (it starts at +0, and an exact
// zero sum rounds to +0 there, rounding to nearest), giving the same bits as +0 * s.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/cpu/gemm_floor_avx2.hpp"

namespace fp8lab::cpu::detail {
namespace {

using namespace floor_avx2;

constexpr int kHalf = kPanel / 2;  // a panel's 8 columns are two vectors of 4 doubles
constexpr int kMaxFractionBits = 36, kMaxDepth = 127;

// acc[r][q] = start[r][q] + sum_k a[k][r] b[k][8 q ..] over k < depth for rows 0-3 and one panel
// q: 8 accumulators of 4 doubles. a is A's [k][4 rows] in FP64, b a group's [k][32 columns].
template <int kPanels>
FP8LAB_TARGET_AVX2 inline void fma_panel(const double* at, const double* b, std::int64_t depth,
                                         const double (*start)[kPanels][kPanel], double (*acc)[kPanels][kPanel], int q) {
  __m256d c00 = _mm256_load_pd(start[0][q]), c01 = _mm256_load_pd(start[0][q] + kHalf);
  __m256d c10 = _mm256_load_pd(start[1][q]), c11 = _mm256_load_pd(start[1][q] + kHalf);
  __m256d c20 = _mm256_load_pd(start[2][q]), c21 = _mm256_load_pd(start[2][q] + kHalf);
  __m256d c30 = _mm256_load_pd(start[3][q]), c31 = _mm256_load_pd(start[3][q] + kHalf);
  const double* bq = b + q * kPanel;
#pragma GCC unroll 4
  for (std::int64_t k = 0; k < depth; ++k) {
    const __m256d x0 = _mm256_loadu_pd(bq + k * kGroupCols), x1 = _mm256_loadu_pd(bq + k * kGroupCols + kHalf);
    const double* a = at + k * kRows;
    __m256d s = _mm256_broadcast_sd(a + 0);
    c00 = _mm256_fmadd_pd(s, x0, c00), c01 = _mm256_fmadd_pd(s, x1, c01);
    s = _mm256_broadcast_sd(a + 1);
    c10 = _mm256_fmadd_pd(s, x0, c10), c11 = _mm256_fmadd_pd(s, x1, c11);
    s = _mm256_broadcast_sd(a + 2);
    c20 = _mm256_fmadd_pd(s, x0, c20), c21 = _mm256_fmadd_pd(s, x1, c21);
    s = _mm256_broadcast_sd(a + 3);
    c30 = _mm256_fmadd_pd(s, x0, c30), c31 = _mm256_fmadd_pd(s, x1, c31);
  }
  _mm256_store_pd(acc[0][q], c00), _mm256_store_pd(acc[0][q] + kHalf, c01);
  _mm256_store_pd(acc[1][q], c10), _mm256_store_pd(acc[1][q] + kHalf, c11);
  _mm256_store_pd(acc[2][q], c20), _mm256_store_pd(acc[2][q] + kHalf, c21);
  _mm256_store_pd(acc[3][q], c30), _mm256_store_pd(acc[3][q] + kHalf, c31);
}

// Bit patterns of 2^x for 4 int64 exponents x (normal FP64, the file comment).
FP8LAB_TARGET_AVX2 inline __m256d power_of_two(__m256i x) {
  return _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(x, _mm256_set1_epi64x(1023)), 52));
}

// Instructions [first, end) of rows row0..row0+3 and the first kPanels panels of group `group`,
// carrying the partial p ([row][panel][lane]): the rounded-down window (see the file comment).
template <int kPanels>
FP8LAB_TARGET_AVX2 __attribute__((noinline)) void floor_instructions(const FloorProblem& pr, std::int64_t row0,
                                                                     std::int64_t group, std::int64_t first,
                                                                     std::int64_t end, float (*p)[kPanels][kPanel]) {
  const int F = pr.fraction_bits;
  const std::int64_t depth = pr.depth, tile = row0 / kRows;
  const __m256d keep_mask =
      _mm256_castsi256_pd(_mm256_set1_epi64x(static_cast<long long>(~((1ull << (52 - std::min(F, 23))) - 1ull))));
  const __m256i minus_f = _mm256_set1_epi64x(-F);
  const __m256i depth64 = _mm256_set1_epi64x(depth), bias_fraction = _mm256_set1_epi64x(1ll << 51);

  alignas(32) std::int8_t maxima[kRows][kGroupCols], threshold[kRows][kGroupCols], counts[kRows][kGroupCols];
  alignas(32) double bias[kRows][kPanels][kPanel], start[kRows][kPanels][kPanel], acc[kRows][kPanels][kPanel];

  const unsigned saved = enter_round_down();
  for (std::int64_t i = first; i < end; ++i) {
    const auto [a_at, g_at] = instruction_at(pr, tile, group, i);
    exponent_maxima(&pr.a.tile_exponent[a_at], &pr.b.group_exponent[g_at], depth, maxima);

    // E per output, the bias 1.5 * 2^(52+E-F) and the accumulator's start bias + trunc(p 2^(F-E)) u,
    // per 4 lanes; the count thresholds per row.
    for (std::int64_t r = 0; r < kRows; ++r) {
      __m256i e[kGroupPanels];
      for (int q = 0; q < kGroupPanels; ++q) e[q] = _mm256_setzero_si256();  // columns past the panels: unused
      for (int q = 0; q < kPanels; ++q) {
        const __m256 pv = _mm256_load_ps(p[r][q]);
        e[q] = panel_exponents(pv, maxima[r], q);
        for (int h = 0; h < 2; ++h) {
          const __m256i e_minus_f = _mm256_add_epi64(
              _mm256_cvtepi32_epi64(h == 0 ? _mm256_castsi256_si128(e[q]) : _mm256_extracti128_si256(e[q], 1)), minus_f);
          const __m256d u = power_of_two(e_minus_f);
          const __m256d b = _mm256_castsi256_pd(_mm256_or_si256(
              _mm256_castpd_si256(power_of_two(_mm256_add_epi64(e_minus_f, _mm256_set1_epi64x(52)))), bias_fraction));
          const __m256d scale = power_of_two(_mm256_sub_epi64(_mm256_setzero_si256(), e_minus_f));
          const __m256d pd = _mm256_cvtps_pd(h == 0 ? _mm256_castps256_ps128(pv) : _mm256_extractf128_ps(pv, 1));
          const __m256d truncated_p = _mm256_round_pd(_mm256_mul_pd(pd, scale), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
          _mm256_store_pd(bias[r][q] + h * kHalf, b);
          _mm256_store_pd(start[r][q] + h * kHalf, _mm256_fmadd_pd(truncated_p, u, b));
        }
      }
      store_count_thresholds(e, F, threshold[r]);
    }

    truncation_counts(&pr.a.tile_lsb[a_at], &pr.b.group_lsb[g_at], depth, threshold, counts);
    for (int q = 0; q < kPanels; ++q)
      fma_panel<kPanels>(&pr.a.tile_value64[a_at], &pr.b.value64[g_at], depth, start, acc, q);

    // S u = (acc + N u) - bias, N = depth + counts added to the pattern; min(F, 23) fraction bits
    // kept; to FP32 (all exact, the file comment).
    for (std::int64_t r = 0; r < kRows; ++r)
      for (int q = 0; q < kPanels; ++q) {
        __m128 half[2];
        for (int h = 0; h < 2; ++h) {
          std::int32_t four;
          std::memcpy(&four, &counts[r][q * kPanel + h * kHalf], sizeof four);
          const __m256i n = _mm256_add_epi64(_mm256_cvtepi8_epi64(_mm_cvtsi32_si128(four)), depth64);
          const __m256d sum = _mm256_castsi256_pd(_mm256_add_epi64(_mm256_castpd_si256(_mm256_load_pd(acc[r][q] + h * kHalf)), n));
          half[h] = _mm256_cvtpd_ps(_mm256_and_pd(_mm256_sub_pd(sum, _mm256_load_pd(bias[r][q] + h * kHalf)), keep_mask));
        }
        _mm256_store_ps(p[r][q], _mm256_set_m128(half[1], half[0]));
      }
  }
  load_mxcsr(saved);
}

}  // namespace

bool fp64_floor_tile_holds(const AccumulationModel& m) {
  return m.kind == AccumulationModel::Kind::fused && m.rounding == AccumulationModel::Rounding::rz && m.fraction_bits >= 0 &&
         m.fraction_bits <= kMaxFractionBits && m.depth >= 1 && m.depth <= kMaxDepth &&
         (4.0 * static_cast<double>(m.depth) + 2.0) * static_cast<double>(1ll << m.fraction_bits) <= static_cast<double>(1ll << 51);
}

FP8LAB_TARGET_AVX2 void tile_floor_fp64_avx2(const FloorProblem& pr, std::int64_t row0, std::int64_t group, std::int64_t panels) {
  switch (panels) {
    case 1: return floor_tile<1, floor_instructions<1>>(pr, row0, group);
    case 2: return floor_tile<2, floor_instructions<2>>(pr, row0, group);
    case 3: return floor_tile<3, floor_instructions<3>>(pr, row0, group);
    default: return floor_tile<4, floor_instructions<4>>(pr, row0, group);
  }
}

}  // namespace fp8lab::cpu::detail
