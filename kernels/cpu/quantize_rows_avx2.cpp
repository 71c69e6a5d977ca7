// The CPU quantizer's AVX2 path for 1xT tiles (contract: quantize_rows_avx2.hpp, quantize.hpp).
//
// Per row (q.cols FP32 values, q.scale_cols tiles of q.tile_cols): for each tile, its amax as
// the max of |x|'s bit patterns, its scale from tile_scale() (scalar, once per tile), then its
// codes 8 lanes at a time and packed to bytes. Every lane operation is the one encode_rn
// (float_formats.hpp) performs on that element, so the codes are those of the scalar codec:
//   scaled = fl32(x * encode) or fl32(x / encode)   (vmulps / vdivps: IEEE RNE, as the scalar op)
//   normal-range code: integer add of the rounding bias, shift, rebias
//   subnormal-range code: fl32(|scaled| + magic) - magic's bits (FP32 RNE addition)
//   selects for subnormal, overflow (satfinite) and NaN, as the scalar masks.
// Columns left over after the last group of 8 are encoded by the scalar codec itself.
#include "kernels/cpu/quantize_rows_avx2.hpp"

#include <immintrin.h>

#include "kernels/cpu/cpu_isa.hpp"

namespace fp8lab::cpu::detail {
namespace {

#define FP8LAB_AVX2_INLINE FP8LAB_TARGET_AVX2 __attribute__((always_inline)) inline

FP8LAB_AVX2_INLINE __m256i splat(std::uint32_t v) { return _mm256_set1_epi32(static_cast<int>(v)); }

// |x|'s bit patterns: ordered as |x| for finite values and inf, NaN above both.
FP8LAB_AVX2_INLINE __m256i abs_bits8(const float* p) {
  return _mm256_and_si256(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), splat(0x7FFFFFFFu));
}

// The largest of 8 lanes. Lanes are <= 0x7FFFFFFF, so the signed max orders them as unsigned.
FP8LAB_AVX2_INLINE std::uint32_t hmax8(__m256i m) {
  __m128i v = _mm_max_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
  v = _mm_max_epi32(v, _mm_shuffle_epi32(v, 0x4E));
  v = _mm_max_epi32(v, _mm_shuffle_epi32(v, 0xB1));
  return static_cast<std::uint32_t>(_mm_cvtsi128_si32(v));
}

// max |x| over n values (quantize.cpp's tile_amax); four accumulators keep the loads going.
FP8LAB_AVX2_INLINE float amax_span(const float* p, std::int64_t n) {
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
  return float_from_bits(bits);
}

// encode_rn<F>(v, satfinite) on 8 lanes; returns the codes as int32 lanes (each 0..255).
template <class F>
FP8LAB_AVX2_INLINE __m256i encode8(__m256 v) {
  using L = FormatLayout<F>;
  constexpr int drop = 23 - F::mantissa_bits;
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i abs = _mm256_and_si256(bits, splat(0x7FFFFFFFu));
  const __m256i sign = _mm256_slli_epi32(_mm256_srli_epi32(bits, 31), L::total_bits - 1);

  // Normal range: wrapping add of (half ULP - 1) + kept LSB, logical shift, rebias.
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(abs, drop), splat(1u));
  const __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(abs, splat((1u << (drop - 1)) - 1u)), lsb);
  const __m256i normal = _mm256_sub_epi32(_mm256_srli_epi32(rounded, drop),
                                          splat(static_cast<std::uint32_t>((127 - F::bias) << F::mantissa_bits)));

  // Subnormal range: FP32's RNE addition of the magic constant does the rounding.
  constexpr float magic = exact_pow2(L::min_exponent - F::mantissa_bits + 23);
  const __m256i subnormal = _mm256_sub_epi32(
      _mm256_castps_si256(_mm256_add_ps(_mm256_castsi256_ps(abs), _mm256_set1_ps(magic))), splat(float_bits(magic)));
  // abs and the bound are <= 0x7FFFFFFF: the signed compares order them as encode_rn's unsigned ones.
  const __m256i below_normal = _mm256_cmpgt_epi32(splat(float_bits(exact_pow2(L::min_exponent))), abs);

  const __m256i magnitude = _mm256_blendv_epi8(normal, subnormal, below_normal);
  const __m256i max_code = splat(F::max_finite_code);
  const __m256i overflow = _mm256_cmpgt_epi32(magnitude, max_code);  // signed, as encode_rn
  const __m256i code = _mm256_or_si256(sign, _mm256_blendv_epi8(magnitude, max_code, overflow));
  const __m256i is_nan = _mm256_cmpgt_epi32(abs, splat(0x7F800000u));
  return _mm256_blendv_epi8(code, splat(L::nan_input_code), is_nan);
}

template <class F, ApplyScale kApply>
FP8LAB_AVX2_INLINE __m256i encode8_at(const float* p, __m256 factor) {
  const __m256 x = _mm256_loadu_ps(p);
  return encode8<F>(kApply == ApplyScale::divide ? _mm256_div_ps(x, factor) : _mm256_mul_ps(x, factor));
}

// int32 lanes holding bytes -> bytes in lane order. packus interleaves the 128-bit halves;
// the final permute puts the four 4-byte groups of each source back in order.
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

// Codes of n values scaled by `factor`.
template <class F, ApplyScale kApply>
FP8LAB_AVX2_INLINE void encode_span(const float* in, std::uint8_t* out, std::int64_t n, float factor) {
  const __m256 f = _mm256_set1_ps(factor);
  std::int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i),
                        pack32(encode8_at<F, kApply>(in + i, f), encode8_at<F, kApply>(in + i + 8, f),
                               encode8_at<F, kApply>(in + i + 16, f), encode8_at<F, kApply>(in + i + 24, f)));
  if (i + 16 <= n) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     pack16(encode8_at<F, kApply>(in + i, f), encode8_at<F, kApply>(in + i + 8, f)));
    i += 16;
  }
  if (i + 8 <= n) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(out + i), pack8(encode8_at<F, kApply>(in + i, f)));
    i += 8;
  }
  for (; i < n; ++i) out[i] = static_cast<std::uint8_t>(fp8lab::encode<F>(scaled_element(in[i], factor, kApply)));
}

template <class F, ApplyScale kApply>
FP8LAB_TARGET_AVX2 void rows_kernel(const float* x, QuantizedTensor& q, std::int64_t r_begin, std::int64_t r_end) {
  constexpr ElementTraits traits = element_traits_of<F>();
  const ScaleRule rule = q.config.scale_rule;
  for (std::int64_t r = r_begin; r < r_end; ++r) {
    const float* row = x + r * q.cols;
    std::uint8_t* out = q.codes.data() + r * q.cols;
    float* scales = q.scales.data() + r * q.scale_cols;  // tile_rows == 1: scale row r
    for (std::int64_t tc = 0; tc < q.scale_cols; ++tc) {
      const std::int64_t c0 = tc * q.tile_cols, n = (c0 + q.tile_cols < q.cols ? q.tile_cols : q.cols - c0);
      const TileScale s = tile_scale(amax_span(row + c0, n), rule, traits, q.tensor_scale);
      scales[tc] = s.decode;
      encode_span<F, kApply>(row + c0, out + c0, n, s.encode);
    }
  }
}

}  // namespace

bool rows_avx2_serves(const QuantizedTensor& q) {
  return q.tile_rows == 1 && q.config.rounding.mode == RoundingMode::nearest &&
         q.config.scale_rule != ScaleRule::nvfp4_4over6;
}

void quantize_rows_avx2(const float* x, QuantizedTensor& q, std::int64_t r_begin, std::int64_t r_end) {
  with_element_codec(q.config.format, [&](auto codec) {
    using F = decltype(codec);
    if (scale_rule_math(q.config.scale_rule).apply == ApplyScale::divide)
      rows_kernel<F, ApplyScale::divide>(x, q, r_begin, r_end);
    else
      rows_kernel<F, ApplyScale::multiply>(x, q, r_begin, r_end);
  });
}

FP8LAB_TARGET_AVX2 float amax_avx2(const float* x, std::int64_t n) { return amax_span(x, n); }

}  // namespace fp8lab::cpu::detail
