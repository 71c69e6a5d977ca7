#pragma once
// Internal to the CPU GEMM: the AVX2 steps both floor-and-count micro-tiles share, the FP32 one
// (gemm_fp8_nt_floor.cpp, which holds the derivation of the floor trick and of the count) and the
// FP64 one (gemm_fp8_nt_floor_fp64.cpp, the same trick in a wider binade for larger F).
//
// Both work on 4 rows x one group of 32 columns (gemm_packing.hpp's floor layout) and need, per
// instruction and output, the same integers: E = max(exponent(p), max_k e_a + e_b) and the count
// N of products whose floor is one below their truncation. Those steps depend on neither F's
// size nor the accumulator's width, only on int8 holding what they hold:
//   E in [-64, 95] (the floor -64, and |p| < 2^95 for any K < 2^63: gemm_fp8_nt_floor.cpp);
//   the threshold E - F - 1 saturates at -128 and is clamped to [-33, 30] (gemm_packing.hpp), so
//     any F in [0, 126] gives the same bytes as the exact difference;
//   N <= D <= 127.
// The MXCSR switch, the promotions and the stores are shared too, so the two tiles differ only in
// their rounded-down windows.
#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/cpu/gemm_microtile.hpp"

namespace fp8lab::cpu::detail::floor_avx2 {

constexpr std::int64_t kRows = kRowsPerTile;  // 4

FP8LAB_TARGET_AVX2 inline void load_mxcsr(unsigned value) { asm volatile("vldmxcsr %0" : : "m"(value) : "memory"); }

FP8LAB_TARGET_AVX2 inline __m256i load_i8x32(const std::int8_t* p) {
  return _mm256_load_si256(reinterpret_cast<const __m256i*>(p));
}

FP8LAB_TARGET_AVX2 inline void store_i8x32(std::int8_t* p, __m256i v) {
  _mm256_store_si256(reinterpret_cast<__m256i*>(p), v);
}

// N per output (gemm_fp8_nt_floor.cpp), negated and offset: n -= 1 for every product that does NOT
// count (signs alike, a zero, or lsb_a + lsb_b > T), so N = depth + n. int8, 32 columns per row;
// threshold[r] holds T - 64 per column, and the wrapping sum of the signed-lsb bytes is <= T - 64
// exactly for the products that count (gemm_packing.hpp).
FP8LAB_TARGET_AVX2 inline void truncation_counts(const std::uint8_t* la, const std::uint8_t* lb, std::int64_t depth,
                                                 const std::int8_t (*threshold)[kGroupCols], std::int8_t (*n)[kGroupCols]) {
  const __m256i t0 = load_i8x32(threshold[0]), t1 = load_i8x32(threshold[1]), t2 = load_i8x32(threshold[2]),
                t3 = load_i8x32(threshold[3]);
  __m256i n0 = _mm256_setzero_si256(), n1 = n0, n2 = n0, n3 = n0;
#pragma GCC unroll 4
  for (std::int64_t k = 0; k < depth; ++k) {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lb + k * kGroupCols));
    const std::uint8_t* a = la + k * kRows;
    n0 = _mm256_add_epi8(n0, _mm256_cmpgt_epi8(_mm256_add_epi8(_mm256_set1_epi8(static_cast<char>(a[0])), b), t0));
    n1 = _mm256_add_epi8(n1, _mm256_cmpgt_epi8(_mm256_add_epi8(_mm256_set1_epi8(static_cast<char>(a[1])), b), t1));
    n2 = _mm256_add_epi8(n2, _mm256_cmpgt_epi8(_mm256_add_epi8(_mm256_set1_epi8(static_cast<char>(a[2])), b), t2));
    n3 = _mm256_add_epi8(n3, _mm256_cmpgt_epi8(_mm256_add_epi8(_mm256_set1_epi8(static_cast<char>(a[3])), b), t3));
  }
  store_i8x32(n[0], n0), store_i8x32(n[1], n1), store_i8x32(n[2], n2), store_i8x32(n[3], n3);
}

// int8 maxima of e_a + e_b over the instruction and the floor -64 (gemm_fp8_nt_avx2.cpp), 32
// columns per row (saturating: a zero:none zero's -126 stays below every real sum,
// gemm_fp8_nt_avx2.cpp).
FP8LAB_TARGET_AVX2 inline void exponent_maxima(const std::int8_t* ea, const std::int8_t* eb, std::int64_t depth,
                                               std::int8_t (*e)[kGroupCols]) {
  __m256i e0 = _mm256_set1_epi8(-64), e1 = e0, e2 = e0, e3 = e0;
#pragma GCC unroll 4
  for (std::int64_t k = 0; k < depth; ++k) {
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(eb + k * kGroupCols));
    const std::int8_t* a = ea + k * kRows;
    e0 = _mm256_max_epi8(e0, _mm256_adds_epi8(_mm256_set1_epi8(a[0]), b));
    e1 = _mm256_max_epi8(e1, _mm256_adds_epi8(_mm256_set1_epi8(a[1]), b));
    e2 = _mm256_max_epi8(e2, _mm256_adds_epi8(_mm256_set1_epi8(a[2]), b));
    e3 = _mm256_max_epi8(e3, _mm256_adds_epi8(_mm256_set1_epi8(a[3]), b));
  }
  store_i8x32(e[0], e0), store_i8x32(e[1], e1), store_i8x32(e[2], e2), store_i8x32(e[3], e3);
}

// Columns 8q..8q+7 of a row of int8 (panel q), sign-extended to int32.
FP8LAB_TARGET_AVX2 inline __m256i widen_panel(const std::int8_t* row, int q) {
  return _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(row + 8 * q)));
}

// 4 vectors of 8 int32 (panels 0-3) to 32 int8 in column order (values fit, see the file comment).
FP8LAB_TARGET_AVX2 inline __m256i narrow_to_int8(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
  // packs work within 128-bit lanes: dword j of the result holds columns 4j..4j+3 in the order
  // 0-3, 8-11, 16-19, 24-27, 4-7, 12-15, 20-23, 28-31; the permutation restores column order.
  const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(v0, v1), _mm256_packs_epi32(v2, v3));
  return _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

// Sets MXCSR to round down (the floor windows' FMAs) and returns the value to restore.
FP8LAB_TARGET_AVX2 inline unsigned enter_round_down() {
  const unsigned saved = _mm_getcsr();
  load_mxcsr((saved & ~static_cast<unsigned>(_MM_ROUND_MASK)) | _MM_ROUND_DOWN);
  return saved;
}

// Where instruction i of row tile `tile` and group `group` starts in A's [tile][k][row] and B's
// [group][k][column] arrays.
struct InstructionAt {
  std::size_t a = 0, g = 0;
};

inline InstructionAt instruction_at(const FloorProblem& pr, std::int64_t tile, std::int64_t group, std::int64_t i) {
  const std::int64_t k0 = i * pr.depth;
  return {static_cast<std::size_t>((tile * pr.a.padded_k + k0) * kRows),
          static_cast<std::size_t>((group * pr.b.padded_k + k0) * kGroupCols)};
}

// E of panel q's 8 outputs of a row: exponent(p) from the FP32 partial's bits (0 and subnormals
// give -127, below the floor) and the row's int8 maxima of the products (at least -64).
FP8LAB_TARGET_AVX2 inline __m256i panel_exponents(__m256 p, const std::int8_t* maxima_row, int q) {
  const __m256i biased = _mm256_srli_epi32(_mm256_slli_epi32(_mm256_castps_si256(p), 1), 24);
  return _mm256_max_epi32(_mm256_sub_epi32(biased, _mm256_set1_epi32(127)), widen_panel(maxima_row, q));
}

// One row's count thresholds count_threshold_byte(E - F - 1) (gemm_packing.hpp) from its E per
// panel (int32, [-64, 95]; panels past the group's: any value, unused) in int8: neither the
// narrowing nor the saturating subtraction changes a byte the clamp keeps (the file comment).
FP8LAB_TARGET_AVX2 inline void store_count_thresholds(const __m256i (&e)[kGroupPanels], int fraction_bits,
                                                      std::int8_t* threshold) {
  const __m256i t =
      _mm256_subs_epi8(narrow_to_int8(e[0], e[1], e[2], e[3]), _mm256_set1_epi8(static_cast<char>(fraction_bits + 1)));
  const __m256i clamped = _mm256_min_epi8(_mm256_max_epi8(t, _mm256_set1_epi8(kCountThresholdMin)),
                                          _mm256_set1_epi8(kCountThresholdMax));
  store_i8x32(threshold, _mm256_sub_epi8(clamped, _mm256_set1_epi8(kCountThresholdShift)));
}

// A rounded-down window: instructions [first, end) of rows row0..row0+3 and the first kPanels
// panels of group `group`, carrying the partial p ([row][panel][lane]) from one to the next.
template <int kPanels>
using FloorWindow = void (*)(const FloorProblem& pr, std::int64_t row0, std::int64_t group, std::int64_t first,
                             std::int64_t end, float (*p)[kPanels][kPanel]);

// Rows row0..row0+3 and the first kPanels panels of group `group`, over the whole of K: one
// rounded-down window per promotion interval, promotions (rounded to nearest) between them.
template <int kPanels, FloorWindow<kPanels> kWindow>
FP8LAB_TARGET_AVX2 inline void floor_tile(const FloorProblem& pr, std::int64_t row0, std::int64_t group) {
  const std::int64_t depth = pr.depth, panel0 = group * kGroupPanels;
  alignas(32) float p[kRows][kPanels][kPanel];      // the partial of the current interval
  alignas(32) float total[kRows][kPanels][kPanel];  // the FP32 accumulator promotions add into
  // Zeroed by vector stores: `= {}` became a `rep stos` per array, 17% of this function's time
  // in the dim256 FP8 step (perf).
  for (std::int64_t r = 0; r < kRows; ++r)
    for (int q = 0; q < kPanels; ++q) {
      _mm256_store_ps(p[r][q], _mm256_setzero_ps());
      _mm256_store_ps(total[r][q], _mm256_setzero_ps());
    }
  for (std::int64_t first = 0; first < pr.instructions;) {
    const std::int64_t last = last_of_interval(pr.plan, depth, first);
    kWindow(pr, row0, group, first, last + 1, p);
    const std::int64_t j = interval_of(pr.plan, depth, last);  // promotion: total += p * s_a * s_b
    for (int q = 0; q < kPanels; ++q) {
      const __m256 sb = _mm256_loadu_ps(&pr.b.scale[static_cast<std::size_t>(((panel0 + q) * pr.plan.intervals + j) * kPanel)]);
      for (std::int64_t r = 0; r < kRows; ++r) {
        const __m256 s =
            _mm256_mul_ps(_mm256_set1_ps(pr.a.scale[static_cast<std::size_t>((row0 + r) * pr.plan.intervals + j)]), sb);
        _mm256_store_ps(total[r][q], _mm256_fmadd_ps(_mm256_load_ps(p[r][q]), s, _mm256_load_ps(total[r][q])));
        _mm256_store_ps(p[r][q], _mm256_setzero_ps());
      }
    }
    first = last + 1;
  }
  // FP32 outputs of whole panels: one vector store per panel (the element loop's scalar stores
  // were half of this function's time); BF16 outputs and a last partial panel element by element.
  for (std::int64_t r = 0; r < kRows && row0 + r < pr.out_rows; ++r)
    for (int q = 0; q < kPanels; ++q) {
      const std::int64_t col0 = (panel0 + q) * kPanel;
      float* out = pr.out + (row0 + r) * pr.out_cols + col0;
      if (!pr.bf16 && col0 + kPanel <= pr.out_cols) {
        _mm256_storeu_ps(out, _mm256_load_ps(total[r][q]));
        continue;
      }
      for (std::int64_t lane = 0; lane < kPanel && col0 + lane < pr.out_cols; ++lane)
        out[lane] = stored_output(total[r][q][lane], pr.bf16);
    }
}

}  // namespace fp8lab::cpu::detail::floor_avx2
