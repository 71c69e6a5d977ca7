// The block-scaled MMA's instruction steps with 8 products at a time (AVX2): the scalar steps
// of gemm_block_scaled.cpp (whose comments give the model), reorganized where exactness makes
// the order free (gemm_block_scaled_terms.hpp says why each sum is exact):
//   kind::mxf8f6f4  E = max over the accumulator's exponent and the terms' (a zero product's is
//                   the zero exponent): one int32 max per 8 products; each term
//                   trunc(a_k b_k 2^(x + F - E)) in FP64 lanes (vroundpd toward zero), summed
//                   in FP64;
//   kind::mxf4nvf4  each group's exact sum p_g of 16 products in FP32 lanes (at most 16
//                   multiples of 2^-2, each at most 36 = 6 x 6: 12 significant bits at most), then the scalar
//                   step's alignment of the few group terms.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/cpu/gemm_block_scaled_terms.hpp"

namespace fp8lab::cpu::detail::block_scaled {
namespace {

FP8LAB_TARGET_AVX2 inline int hmax_epi32(__m256i v) {
  __m128i m = _mm_max_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0x4E));
  m = _mm_max_epi32(m, _mm_shuffle_epi32(m, 0xB1));
  return _mm_cvtsi128_si32(m);
}

// Exact here: every lane holds an integer (or a multiple of 2^-2) whose sums stay exact.
FP8LAB_TARGET_AVX2 inline double hsum_pd(__m256d v) {
  const __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
  return _mm_cvtsd_f64(_mm_add_sd(s, _mm_unpackhi_pd(s, s)));
}

FP8LAB_TARGET_AVX2 inline float hsum_ps(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// trunc(p * unit) for 4 products p: exact (a power-of-two scaling of an exact product, then trunc).
FP8LAB_TARGET_AVX2 inline __m256d truncated_terms(const float* product, __m256d unit) {
  return _mm256_round_pd(_mm256_mul_pd(_mm256_cvtps_pd(_mm_load_ps(product)), unit), _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
}

FP8LAB_TARGET_AVX2 inline float mxf8f6f4_step_avx2(float c, const float* va, const std::int16_t* ea, const float* vb,
                                            const std::int16_t* eb, int scale_exponent, const BlockScaledMma& mma) {
  if (!std::isfinite(c)) return c;  // as the scalar step
  alignas(32) float product[64];
  // A zero product's lane holds zero_exponent - x, so that adding x back gives the scalar
  // step's zero exponent.
  const __m256i zero_lane = _mm256_set1_epi32(mma.zero_exponent - scale_exponent);
  __m256i e_max = _mm256_set1_epi32(accumulator_exponent(c, mma.zero_exponent) - scale_exponent);
  for (int k = 0; k < mma.depth; k += 8) {
    const __m256 p = _mm256_mul_ps(_mm256_loadu_ps(va + k), _mm256_loadu_ps(vb + k));  // exact
    _mm256_store_ps(product + k, p);
    const __m256i e = _mm256_add_epi32(_mm256_cvtepi16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ea + k))),
                                       _mm256_cvtepi16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(eb + k))));
    const __m256i is_zero = _mm256_castps_si256(_mm256_cmp_ps(p, _mm256_setzero_ps(), _CMP_EQ_OQ));
    e_max = _mm256_max_epi32(e_max, _mm256_blendv_epi8(e, zero_lane, is_zero));
  }
  const int E = hmax_epi32(e_max) + scale_exponent;
  const __m256d unit = _mm256_set1_pd(pow2(scale_exponent + mma.fraction_bits - E));
  __m256d sum0 = _mm256_setzero_pd(), sum1 = sum0;  // two chains: exact sums, any order
  for (int k = 0; k < mma.depth; k += 8) {
    sum0 = _mm256_add_pd(sum0, truncated_terms(product + k, unit));
    sum1 = _mm256_add_pd(sum1, truncated_terms(product + k + 4, unit));
  }
  const double total = static_cast<double>(truncated(static_cast<double>(c) * pow2(mma.fraction_bits - E))) +
                       hsum_pd(_mm256_add_pd(sum0, sum1));
  return round_toward_zero_fp32(total * pow2(E - mma.fraction_bits));
}

FP8LAB_TARGET_AVX2 inline float mxf4nvf4_step_avx2(float c, const float* va, const float* vb, const double* sig_a, const int* exp_a,
                                            const double* sig_b, const int* exp_b, const BlockScaledMma& mma) {
  if (!std::isfinite(c)) return c;
  double group_sum[8];
  bool all_zero[8];
  for (int g = 0; g < mma.depth / mma.group; ++g) {
    __m256 p = _mm256_setzero_ps();
    int nonzero_lanes = 0;
    for (int k = g * mma.group; k < (g + 1) * mma.group; k += 8) {
      const __m256 product = _mm256_mul_ps(_mm256_loadu_ps(va + k), _mm256_loadu_ps(vb + k));  // exact
      p = _mm256_add_ps(p, product);
      nonzero_lanes |= _mm256_movemask_ps(_mm256_cmp_ps(product, _mm256_setzero_ps(), _CMP_NEQ_UQ));
    }
    group_sum[g] = static_cast<double>(hsum_ps(p));
    all_zero[g] = nonzero_lanes == 0;
  }
  return mxf4nvf4_align_groups(c, group_sum, all_zero, sig_a, exp_a, sig_b, exp_b, mma);
}

struct Avx2Steps {
  FP8LAB_TARGET_AVX2 static float mxf8f6f4(float c, const float* va, const std::int16_t* ea, const float* vb,
                                           const std::int16_t* eb, int scale_exponent, const BlockScaledMma& mma) {
    return mxf8f6f4_step_avx2(c, va, ea, vb, eb, scale_exponent, mma);
  }
  FP8LAB_TARGET_AVX2 static float mxf4nvf4(float c, const float* va, const float* vb, const double* sig_a, const int* exp_a,
                                           const double* sig_b, const int* exp_b, const BlockScaledMma& mma) {
    return mxf4nvf4_step_avx2(c, va, vb, sig_a, exp_a, sig_b, exp_b, mma);
  }
};

}  // namespace

FP8LAB_TARGET_AVX2 float block_scaled_dot_avx2(const OperandView& a, const OperandView& b, std::int64_t instructions,
                                               std::int64_t blocks_per_instruction, const BlockScaledMma& mma) {
  return dot_over_instructions<Avx2Steps>(a, b, instructions, blocks_per_instruction, mma);
}

}  // namespace fp8lab::cpu::detail::block_scaled
