#pragma once
// Internal to quantize_rows_avx2.cpp: the 8-lane steps of the CPU quantizer's AVX2 path. Each
// is the scalar definition's arithmetic lane by lane (named at each function), so it gives the
// same bits:
//   amax   max of |x|'s bit patterns (quantize.cpp's tile_amax): exact, in any order;
//   encode encode_rn<F>(v, satfinite) of float_formats.hpp, step by step; for E2M1 lanes known
//          not to be NaN, encode_e2m1_by_quantum_add's method (fewer operations, same codes);
//   block  scale_rules.hpp's e4m3_block_scale (nvfp4's block scales: min(v, 448) rounded to
//          E4M3) by quantum addition: other operations, the same value for every v with its
//          sign bit clear and for NaN (slow test);
//   pack   int32 lanes holding bytes -> bytes, in lane order.
// Only for functions compiled for AVX2 (FP8LAB_TARGET_AVX2): they are always inlined there.
#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/formats/float_formats.hpp"

#define FP8LAB_AVX2_INLINE FP8LAB_TARGET_AVX2 __attribute__((always_inline)) inline

namespace fp8lab::cpu::detail::avx2 {

FP8LAB_AVX2_INLINE __m256i splat(std::uint32_t v) { return _mm256_set1_epi32(static_cast<int>(v)); }

// |x|'s bit patterns: ordered as |x| for finite values and inf, NaN above both. Every lane is
// <= 0x7FFFFFFF, so the signed integer max and compares below order them as unsigned.
FP8LAB_AVX2_INLINE __m256i abs_bits8(const float* p) {
  return _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), splat(0x7FFFFFFFu));
}

FP8LAB_AVX2_INLINE std::uint32_t hmax8(__m256i m) {
  __m128i v = _mm_max_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
  v = _mm_max_epi32(v, _mm_shuffle_epi32(v, 0x4E));
  v = _mm_max_epi32(v, _mm_shuffle_epi32(v, 0xB1));
  return static_cast<std::uint32_t>(_mm_cvtsi128_si32(v));
}

// max |x| over n values as a bit pattern; four accumulators keep the loads going.
FP8LAB_AVX2_INLINE std::uint32_t amax_bits(const float* p, std::int64_t n) {
  __m256i m0 = _mm256_setzero_si256(), m1 = m0, m2 = m0, m3 = m0;
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    m0 = _mm256_max_epi32(m0, abs_bits8(p + i));
    m1 = _mm256_max_epi32(m1, abs_bits8(p + i + 8));
    m2 = _mm256_max_epi32(m2, abs_bits8(p + i + 16));
    m3 = _mm256_max_epi32(m3, abs_bits8(p + i + 24));
  }
  for (; i + 8 <= n; i += 8) m0 = _mm256_max_epi32(m0, abs_bits8(p + i));
  std::uint32_t bits = hmax8(_mm256_max_epi32(_mm256_max_epi32(m0, m1), _mm256_max_epi32(m2, m3)));
  for (; i < n; ++i) {
    const std::uint32_t b = float_bits(p[i]) & 0x7FFFFFFFu;
    bits = b > bits ? b : bits;
  }
  return bits;
}

// The amaxes of 8 consecutive tiles of t values each (t a multiple of 8): lane j = tile j.
// Each tile's vectors are max-ed into one, then the 8 are reduced across lanes together
// (unpack 32, unpack 64, swap halves), 7 shuffle-and-max steps for the 8 instead of 5 each.
template <std::int64_t kT>
FP8LAB_AVX2_INLINE __m256i amax8_tiles(const float* p, std::int64_t t) {
  if constexpr (kT != 0) t = kT;
  __m256i m[8];
  for (int j = 0; j < 8; ++j) {
    m[j] = abs_bits8(p + j * t);
    for (std::int64_t i = 8; i < t; i += 8) m[j] = _mm256_max_epi32(m[j], abs_bits8(p + j * t + i));
  }
  __m256i pair[4];
  for (int j = 0; j < 4; ++j)
    pair[j] = _mm256_max_epi32(_mm256_unpacklo_epi32(m[2 * j], m[2 * j + 1]),
                               _mm256_unpackhi_epi32(m[2 * j], m[2 * j + 1]));
  const __m256i q0 = _mm256_max_epi32(_mm256_unpacklo_epi64(pair[0], pair[1]), _mm256_unpackhi_epi64(pair[0], pair[1]));
  const __m256i q1 = _mm256_max_epi32(_mm256_unpacklo_epi64(pair[2], pair[3]), _mm256_unpackhi_epi64(pair[2], pair[3]));
  return _mm256_max_epi32(_mm256_permute2x128_si256(q0, q1, 0x20), _mm256_permute2x128_si256(q0, q1, 0x31));
}

// encode<E2M1>(v) on 8 lanes that are not NaN, by float_formats.hpp's quantum addition: |v|
// (capped at 6, whose code 7 every larger |v| and inf take) plus M, an FP32 whose ULP is E2M1's
// quantum q at |v| (0.5 below 2, 1 in [2, 4), 2 from 4), rounds |v| to a multiple of q, ties to
// even, in FP32's own addition. M's fraction field holds code(start) - start / q for its range
// (0 below 2, 2 from 2, 4 from 4), so the sum's fraction field is the code itself, and the
// addition's tie to an even fraction is E2M1's tie to an even code.
// M comes from a 4-entry table indexed by the low 2 bits of |v|'s exponent field (vpermilps,
// in-lane: cheaper than a cross-lane vpermd on Zen 2), the field raised to at least 126
// (|v| >= 0.5; only the index is raised, not |v|) so that 126..129 are the only fields and
// their low 2 bits distinct: 128 (|v| in [2, 4)) -> 0, 129 ([4, 6]) -> 1, 126 and 127 (below 2)
// -> 2 and 3, both 2^22. All 2^32 - 2^24 + 2 non-NaN FP32 patterns give encode<E2M1>'s code
// (tests/slow/float_formats_exhaustive_test.cpp).
FP8LAB_AVX2_INLINE __m256i encode8_e2m1_not_nan(__m256 v) {
  const __m256 a = _mm256_min_ps(_mm256_and_ps(v, _mm256_castsi256_ps(splat(0x7FFFFFFFu))), _mm256_set1_ps(6.0f));
  const __m256i exponent = _mm256_srli_epi32(_mm256_max_epi32(_mm256_castps_si256(a), splat(float_bits(0.5f))), 23);
  const int m_below_2 = static_cast<int>(float_bits(0x1p22f));        // q = 0.5, codes 0..4
  const int m_from_2 = static_cast<int>(float_bits(0x1p23f) + 2u);    // q = 1, codes 4..6
  const int m_from_4 = static_cast<int>(float_bits(0x1p24f) + 4u);    // q = 2, codes 6, 7
  const __m256 m_table = _mm256_castsi256_ps(
      _mm256_setr_epi32(m_from_2, m_from_4, m_below_2, m_below_2, m_from_2, m_from_4, m_below_2, m_below_2));
  const __m256 m = _mm256_permutevar_ps(m_table, exponent);
  const __m256 code = _mm256_and_ps(_mm256_add_ps(a, m), _mm256_castsi256_ps(splat(0x007FFFFFu)));
  // The sign bit goes on where v's is set (blendv reads v's sign bit as the mask), -0 included.
  return _mm256_castps_si256(_mm256_blendv_ps(code, _mm256_or_ps(code, _mm256_castsi256_ps(splat(0x8u))), v));
}

// encode_rn<F>(v, satfinite) on 8 lanes, codes as int32 lanes (0..255). kMayBeNan = false
// drops the NaN select, for callers that know no lane is NaN (the result is then the same).
template <class F, bool kMayBeNan = true>
FP8LAB_AVX2_INLINE __m256i encode8(__m256 v) {
  if constexpr (std::is_same_v<F, E2M1> && !kMayBeNan) return encode8_e2m1_not_nan(v);
  using L = FormatLayout<F>;
  constexpr int drop = 23 - F::mantissa_bits;
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i abs = _mm256_and_si256(bits, splat(0x7FFFFFFFu));

  // Normal range: (abs + half ULP - 1 + kept LSB) >> drop, less the rebias. The rebias is
  // subtracted before the shift (it is a multiple of 2^drop, so the result is the same
  // wherever this lane is used: a lane below the subtracted power of two, whose sum wraps, is
  // below the smallest normal and takes the subnormal code; abs + 2^drop never wraps).
  constexpr std::uint32_t rebias = static_cast<std::uint32_t>(127 - F::bias) << 23;
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(abs, drop), splat(1u));
  const __m256i normal =
      _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(abs, splat((1u << (drop - 1)) - 1u - rebias)), lsb), drop);

  // Subnormal range: FP32's RNE addition of the magic constant does the rounding.
  constexpr float magic = exact_pow2(L::min_exponent - F::mantissa_bits + 23);
  const __m256i subnormal = _mm256_sub_epi32(
      _mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(abs), _mm256_set1_ps(magic))), splat(float_bits(magic)));
  // abs < the smallest normal's pattern, as an ordered FP32 compare (a NaN abs is not below;
  // GCC would lower the integer form to min + compare).
  const __m256 below_normal =
      _mm256_cmp_ps(_mm256_castsi256_ps(abs), _mm256_set1_ps(exact_pow2(L::min_exponent)), _CMP_LT_OQ);
  const __m256i magnitude = _mm256_castps_si256(
      _mm256_blendv_ps(_mm256_castsi256_ps(normal), _mm256_castsi256_ps(subnormal), below_normal));

  // Overflow saturates: encode_rn's signed compare with the largest code, as a signed min; the
  // sign bit goes on where v's is set (blendv reads v's sign bit as the mask).
  const __m256 saturated = _mm256_castsi256_ps(_mm256_min_epi32(magnitude, splat(F::max_finite_code)));
  const __m256i code = _mm256_castps_si256(_mm256_blendv_ps(
      saturated, _mm256_or_ps(saturated, _mm256_castsi256_ps(splat(L::sign_bit))), v));
  if constexpr (!kMayBeNan) return code;
  const __m256i is_nan = _mm256_cmpgt_epi32(abs, splat(0x7F800000u));
  return _mm256_blendv_epi8(code, splat(L::nan_input_code), is_nan);
}

// scale_rules.hpp's e4m3_block_scale on 8 lanes: min(v, 448) rounded to E4M3 (RNE), for v with
// its sign bit clear (a NaN lane gives 448, vminps's second operand, as fminf there). Quantum addition: M = 2^20
// times c's power of two, at least 2^-6 (E4M3's smallest normal; below it the quantum is
// 2^-9 throughout), has an FP32 ULP of E4M3's quantum at c, so fl32(c + M) rounds c to
// E4M3's precision, ties to even, and subtracting M again is exact. All 2^31 FP32 patterns with
// the sign bit clear, NaNs included, give e4m3_block_scale's value
// (tests/slow/float_formats_exhaustive_test.cpp).
FP8LAB_AVX2_INLINE __m256 e4m3_block_scale8(__m256 v) {
  const __m256 c = _mm256_min_ps(v, _mm256_set1_ps(448.0f));
  const __m256i power_of_two = _mm256_and_si256(_mm256_castps_si256(c), splat(0x7F800000u));
  const __m256 m = _mm256_castsi256_ps(
      _mm256_add_epi32(_mm256_max_epi32(power_of_two, splat(float_bits(0x1p-6f))), splat(20u << 23)));
  return _mm256_sub_ps(_mm256_add_ps(c, m), m);
}

// packus interleaves the 128-bit halves; the permutes put each source's bytes back in order.
FP8LAB_AVX2_INLINE __m256i pack32(__m256i a, __m256i b, __m256i c, __m256i d) {
  const __m256i abcd = _mm256_packus_epi16(_mm256_packus_epi32(a, b), _mm256_packus_epi32(c, d));
  return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}
FP8LAB_AVX2_INLINE __m128i pack16(__m256i a, __m256i b) {
  const __m256i ab = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xD8);  // a0..7, b0..7 as int16
  return _mm_packus_epi16(_mm256_castsi256_si128(ab), _mm256_extracti128_si256(ab, 1));
}
FP8LAB_AVX2_INLINE __m128i pack8(__m256i a) {
  const __m128i a16 = _mm_packus_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
  return _mm_packus_epi16(a16, a16);
}

}  // namespace fp8lab::cpu::detail::avx2
