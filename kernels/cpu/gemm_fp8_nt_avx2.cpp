// The AVX2 + FMA micro-tiles of the CPU FP8 GEMM, compiled for that target whatever the build's
// baseline (FP8LAB_TARGET_AVX2); gemm_fp8_nt.cpp runs them on CPUs that have it, and its file
// comment gives the model and the exponent ranges these tiles rely on. Each covers 4 rows x
// 8-column panels over instructions [i_begin, i_end), reading and writing acc and the partial p
// in the state arrays (gemm_microtile.hpp), with the bits of gemm_fp8_nt.cpp's scalar tiles.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/cpu/gemm_microtile.hpp"

namespace fp8lab::cpu::detail {
namespace {

// fp32 model: p = fma(a_k, b_k, p) in K order, 4 rows x 2 panels (8 independent FMA chains).
template <int kPanels>
FP8LAB_TARGET_AVX2 void tile_fp32_avx2(const GemmProblem& pr, std::int64_t row0, std::int64_t panel0, std::int64_t i_begin, std::int64_t i_end) {
  __m256 acc[kRowsPerTile][kPanels], p[kRowsPerTile][kPanels];
  for (std::int64_t r = 0; r < kRowsPerTile; ++r)
    for (int q = 0; q < kPanels; ++q) {
      const auto state = static_cast<std::size_t>((row0 + r) * pr.state_cols + (panel0 + q) * kPanel);
      acc[r][q] = _mm256_loadu_ps(pr.acc + state);
      p[r][q] = _mm256_loadu_ps(pr.partial + state);
    }
  for (std::int64_t i = i_begin; i < i_end; ++i) {
    const std::int64_t k0 = i * pr.depth;
    const float* at = &pr.a.tile_value[static_cast<std::size_t>(((row0 / kRowsPerTile) * pr.a.padded_k + k0) * kRowsPerTile)];
    const float* bv[kPanels];
    for (int q = 0; q < kPanels; ++q)
      bv[q] = &pr.b.value[static_cast<std::size_t>(((panel0 + q) * pr.b.padded_k + k0) * kPanel)];
    for (std::int64_t k = 0; k < pr.depth; ++k) {
      __m256 b[kPanels];
      for (int q = 0; q < kPanels; ++q) b[q] = _mm256_loadu_ps(bv[q] + k * kPanel);
      for (std::int64_t r = 0; r < kRowsPerTile; ++r) {
        const __m256 a = _mm256_set1_ps(at[k * kRowsPerTile + r]);
        for (int q = 0; q < kPanels; ++q) p[r][q] = _mm256_fmadd_ps(a, b[q], p[r][q]);
      }
    }
    if (promotes_after(pr, i)) {
      const std::int64_t j = interval_of(pr, i);
      for (int q = 0; q < kPanels; ++q) {
        const __m256 sb =
            _mm256_loadu_ps(&pr.b.scale[static_cast<std::size_t>(((panel0 + q) * pr.plan.intervals + j) * kPanel)]);
        for (std::int64_t r = 0; r < kRowsPerTile; ++r) {
          const __m256 s = _mm256_mul_ps(_mm256_set1_ps(pr.a.scale[static_cast<std::size_t>((row0 + r) * pr.plan.intervals + j)]), sb);
          acc[r][q] = _mm256_fmadd_ps(p[r][q], s, acc[r][q]);
          p[r][q] = _mm256_setzero_ps();
        }
      }
    }
  }
  for (std::int64_t r = 0; r < kRowsPerTile; ++r)
    for (int q = 0; q < kPanels; ++q) {
      const auto state = static_cast<std::size_t>((row0 + r) * pr.state_cols + (panel0 + q) * kPanel);
      _mm256_storeu_ps(pr.acc + state, acc[r][q]);
      _mm256_storeu_ps(pr.partial + state, p[r][q]);
    }
}

}  // namespace

// The fused model: 8 output columns per vector, 4 rows per tile (see gemm_fp8_nt.cpp's file comment).
FP8LAB_TARGET_AVX2 void tile_fused_avx2(const GemmProblem& pr, std::int64_t row0, std::int64_t panel, std::int64_t i_begin,
                                        std::int64_t i_end) {
  const int F = pr.model.fraction_bits;
  const bool rz = pr.model.rounding == AccumulationModel::Rounding::rz;
  const __m256i keep_mask = _mm256_set1_epi32(static_cast<int>(~((1u << (23 - F)) - 1u)));
  const __m256i rne_bias = _mm256_set1_epi32(F < 23 ? (1 << (22 - F)) - 1 : 0);
  const __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(127), all_ones = _mm256_set1_epi32(-1);
  const __m256i scale_exponent = _mm256_set1_epi32(127 + F), unscale_exponent = _mm256_set1_epi32(127 - F);
  const __m256i exponent_floor = _mm256_set1_epi32(-64);
  __m256 acc[kRowsPerTile], p[kRowsPerTile];
  for (std::int64_t r = 0; r < kRowsPerTile; ++r) {
    const auto state = static_cast<std::size_t>((row0 + r) * pr.state_cols + panel * kPanel);
    acc[r] = _mm256_loadu_ps(pr.acc + state);
    p[r] = _mm256_loadu_ps(pr.partial + state);
  }
  for (std::int64_t i = i_begin; i < i_end; ++i) {
    const std::int64_t k0 = i * pr.depth;
    const float* bv = &pr.b.value[static_cast<std::size_t>((panel * pr.b.padded_k + k0) * kPanel)];
    const float* at = &pr.a.tile_value[static_cast<std::size_t>(((row0 / kRowsPerTile) * pr.a.padded_k + k0) * kRowsPerTile)];
    __m256i e[kRowsPerTile];
    // E starts from exponent(p); the products can only raise it where their bound
    // max_k e_a + max_k e_b exceeds it, so the exact max over k is skipped when no lane needs it.
    const __m256i b_max = _mm256_set1_epi32(pr.b.instruction_max[static_cast<std::size_t>(panel * pr.instructions + i)]);
    bool products_matter = false;
    for (std::int64_t r = 0; r < kRowsPerTile; ++r) {
      const __m256i biased = _mm256_and_si256(_mm256_srli_epi32(_mm256_castps_si256(p[r]), 23), _mm256_set1_epi32(0xFF));
      e[r] = _mm256_sub_epi32(_mm256_max_epi32(biased, one), bias);
      const __m256i bound = _mm256_add_epi32(
          b_max, _mm256_set1_epi32(pr.a.instruction_max[static_cast<std::size_t>((row0 + r) * pr.instructions + i)]));
      products_matter = products_matter || !_mm256_testz_si256(_mm256_cmpgt_epi32(bound, e[r]), all_ones);
    }
    if (products_matter) {
      // All 32 outputs at once in int8 (exponent sums of nonzero products lie in [-28, 30] for
      // every format pairing, see gemm_fp8_nt.cpp's file comment), then widened per row:
      // byte r * 8 + lane of e8 is output (row r, lane). A's 4 exponents are spread to 8 copies
      // each by one in-lane byte shuffle; B's 8 fill the 4 quarters by one broadcast.
      const std::int8_t* ta = &pr.a.tile_exponent[static_cast<std::size_t>(((row0 / kRowsPerTile) * pr.a.padded_k + k0) * kRowsPerTile)];
      const std::int8_t* tb = &pr.b.lane_exponent[static_cast<std::size_t>((panel * pr.b.padded_k + k0) * kPanel)];
      const __m256i spread = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                              2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
      __m256i e8 = _mm256_set1_epi8(-128);
      for (std::int64_t k = 0; k < pr.depth; ++k) {
        std::int32_t a4;
        std::int64_t b8;
        std::memcpy(&a4, ta + k * kRowsPerTile, sizeof a4);
        std::memcpy(&b8, tb + k * kPanel, sizeof b8);
        const __m256i ea = _mm256_shuffle_epi8(_mm256_set1_epi32(a4), spread);
        // Saturating: with zero:none a zero's exponent is -126, and -126 + -126 must stay
        // below every real exponent rather than wrap (it saturates to -128). A zero times a
        // nonzero code of either format sums to -126 + [-14, 15] = [-140, -111]: saturated or
        // not, below -28, the least sum of two nonzero codes; with zero:min a zero has its own
        // format's emin (-6 or -14) and its sums stay in [-28, 30].
        e8 = _mm256_max_epi8(e8, _mm256_adds_epi8(ea, _mm256_set1_epi64x(b8)));
      }
      const __m128i low = _mm256_castsi256_si128(e8), high = _mm256_extracti128_si256(e8, 1);
      const __m128i rows8[kRowsPerTile] = {low, _mm_srli_si128(low, 8), high, _mm_srli_si128(high, 8)};
      for (std::int64_t r = 0; r < kRowsPerTile; ++r) e[r] = _mm256_max_epi32(e[r], _mm256_cvtepi8_epi32(rows8[r]));
    }
    __m256 scale[kRowsPerTile];
    __m256i sum[kRowsPerTile];
    for (std::int64_t r = 0; r < kRowsPerTile; ++r) {
      // 2^(F-E) built from exponent bits needs 1 <= 127 + F - E <= 254, and this path has
      // F <= 21 (vector_path_holds). A nonzero term has an exponent >= -49 (nonzero products
      // have e_a + e_b >= -28 in every format pairing, -20 for E4M3 x E5M2, and p is a multiple
      // of 2^(E' - F) for an earlier E' >= -28), so E < -64 happens only with zero:none in a
      // lane whose terms are all zero, where flooring E changes nothing. Above, E is at most
      // max(30, exponent(p)), far below 127 + F. The unscale 2^(E-F) needs 1 <= E + 127 - F:
      // E >= -64 gives 63 - F >= 42.
      e[r] = _mm256_max_epi32(e[r], exponent_floor);
      scale[r] = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_sub_epi32(scale_exponent, e[r]), 23));
      const __m256 c = _mm256_mul_ps(p[r], scale[r]);
      sum[r] = rz ? _mm256_cvttps_epi32(c) : _mm256_cvtps_epi32(c);
    }
    if (rz) {
      for (std::int64_t k = 0; k < pr.depth; ++k) {
        const __m256 b = _mm256_loadu_ps(bv + k * kPanel);
        for (std::int64_t r = 0; r < kRowsPerTile; ++r)
          sum[r] = _mm256_add_epi32(
              sum[r], _mm256_cvttps_epi32(_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(at[k * kRowsPerTile + r]), b), scale[r])));
      }
    } else {
      for (std::int64_t k = 0; k < pr.depth; ++k) {
        const __m256 b = _mm256_loadu_ps(bv + k * kPanel);
        for (std::int64_t r = 0; r < kRowsPerTile; ++r)
          sum[r] = _mm256_add_epi32(
              sum[r], _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(at[k * kRowsPerTile + r]), b), scale[r])));
      }
    }
    // S is below 2^24 (vector_path_holds, checked by the caller), so the conversion to FP32 is
    // exact; then keep F fraction bits of the sign-magnitude pattern and scale by 2^(E-F).
    for (std::int64_t r = 0; r < kRowsPerTile; ++r) {
      __m256i bits = _mm256_castps_si256(_mm256_cvtepi32_ps(sum[r]));
      if (!rz) {
        const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 23 - F), one);
        bits = _mm256_add_epi32(bits, _mm256_add_epi32(rne_bias, lsb));
      }
      bits = _mm256_and_si256(bits, keep_mask);
      const __m256 unscale = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e[r], unscale_exponent), 23));
      p[r] = _mm256_mul_ps(_mm256_castsi256_ps(bits), unscale);
    }
    if (promotes_after(pr, i)) {
      const std::int64_t j = interval_of(pr, i);
      const __m256 sb = _mm256_loadu_ps(&pr.b.scale[static_cast<std::size_t>((panel * pr.plan.intervals + j) * kPanel)]);
      for (std::int64_t r = 0; r < kRowsPerTile; ++r) {
        const __m256 s = _mm256_mul_ps(_mm256_set1_ps(pr.a.scale[static_cast<std::size_t>((row0 + r) * pr.plan.intervals + j)]), sb);
        acc[r] = _mm256_fmadd_ps(p[r], s, acc[r]);
        p[r] = _mm256_setzero_ps();
      }
    }
  }
  for (std::int64_t r = 0; r < kRowsPerTile; ++r) {
    const auto state = static_cast<std::size_t>((row0 + r) * pr.state_cols + panel * kPanel);
    _mm256_storeu_ps(pr.acc + state, acc[r]);
    _mm256_storeu_ps(pr.partial + state, p[r]);
  }
}

FP8LAB_TARGET_AVX2 void tile_fp32_avx2_one_panel(const GemmProblem& pr, std::int64_t row0, std::int64_t panel0,
                                                 std::int64_t i_begin, std::int64_t i_end) {
  tile_fp32_avx2<1>(pr, row0, panel0, i_begin, i_end);
}

FP8LAB_TARGET_AVX2 void tile_fp32_avx2_two_panels(const GemmProblem& pr, std::int64_t row0, std::int64_t panel0,
                                                  std::int64_t i_begin, std::int64_t i_end) {
  tile_fp32_avx2<2>(pr, row0, panel0, i_begin, i_end);
}

}  // namespace fp8lab::cpu::detail
