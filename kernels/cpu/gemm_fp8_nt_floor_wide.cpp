// The floor micro-tile on 16 lanes: what AVX-512 CPUs run for the truncating fused models.
//
// Same arithmetic, step for step, as the AVX2 floor micro-tile (gemm_fp8_nt_floor.cpp holds the
// derivation, the ranges and the rounding window's rules); only the width and the layout of the
// registers differ. A micro-tile is 4 rows x one group of 32 columns, held as
//   FP32 and int32 (accumulators, partials, scales): per row, two vectors of 16 columns;
//   int8 (exponent maxima, thresholds, counts): per pair of rows, one vector of 64 bytes, row
//     2j in bytes 0-31 and row 2j + 1 in bytes 32-63, so B's 32 bytes of one k serve both rows.
//
// Written with GCC vector extensions, as gemm_fp8_nt_wide.cpp: the same source compiles to zmm
// code for AVX-512 and to pairs of ymm for AVX2 (with the default x86-64-v3 build; a build whose
// -march has AVX-512 may use it in both), and the exact tests run both builds wherever the CPU
// has them (GemmOptions::force_wide_floor_tiles: the AVX2 one), so the 16-lane algorithm is
// checked bit for bit on every machine; the
// compiler keeps the meaning of each element-wise operation in both builds. What has no
// element-wise operator, or needs one instruction the compiler would not choose by itself,
// comes from each target's intrinsics in the small functions below (*_avx512, *_avx2): the FMA
// (one rounding, in MXCSR's mode), saturating int8 addition, and the broadcasts from memory.
// The window and the tile are compiled once per target from gemm_fp8_nt_floor_wide_body.inc
// (a target's intrinsics can only be inlined into functions compiled for that target).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/cpu/gemm_microtile.hpp"

namespace fp8lab::cpu::detail {
namespace {

// The helpers below take and return 64-byte vectors, whose calling convention differs between
// AVX2 and AVX-512 code (what -Wpsabi warns of); every one is always_inline, so no such call is
// ever made. kernels/CMakeLists.txt compiles this file with -Wno-psabi (GCC reports it after
// the source is read, where no pragma reaches).

typedef float f32x16 __attribute__((vector_size(64)));
typedef float f32x8 __attribute__((vector_size(32)));
typedef std::int32_t i32x16 __attribute__((vector_size(64)));
typedef std::uint32_t u32x16 __attribute__((vector_size(64)));
typedef std::int8_t i8x64 __attribute__((vector_size(64)));
typedef std::uint8_t u8x64 __attribute__((vector_size(64)));
typedef std::int8_t i8x32 __attribute__((vector_size(32)));
typedef std::int8_t i8x16 __attribute__((vector_size(16)));

// Loads and stores through may_alias types (packed operands are 16-byte aligned at best).
typedef float f32x16_unaligned __attribute__((vector_size(64), aligned(4), may_alias));
#define FP8LAB_AT(type, at) (*reinterpret_cast<type##_unaligned*>(at))
#define FP8LAB_LOAD(type, from) (*reinterpret_cast<const type##_unaligned*>(from))

constexpr std::int64_t kRows = kRowsPerTile;  // 4
constexpr int kPairs = 2;                     // row pairs: rows (0, 1) and (2, 3)
constexpr int kHalves = 2;                    // 16-column halves of the group's 32 columns
constexpr int kLanes = 16;

// Index lists for __builtin_shufflevector.
#define FP8LAB_SEQ8(b) b, b + 1, b + 2, b + 3, b + 4, b + 5, b + 6, b + 7
#define FP8LAB_SEQ16(b) FP8LAB_SEQ8(b), FP8LAB_SEQ8(b + 8)
#define FP8LAB_SEQ32(b) FP8LAB_SEQ16(b), FP8LAB_SEQ16(b + 16)
#define FP8LAB_REP8(i) i, i, i, i, i, i, i, i
#define FP8LAB_REP32(i) FP8LAB_REP8(i), FP8LAB_REP8(i), FP8LAB_REP8(i), FP8LAB_REP8(i)

// ---- per target ---------------------------------------------------------------------------
// fma(a, b, c), one rounding in MXCSR's mode.
FP8LAB_TARGET_AVX512 __attribute__((always_inline)) inline f32x16 fma_avx512(f32x16 a, f32x16 b, f32x16 c) {
  return _mm512_fmadd_ps(a, b, c);
}
FP8LAB_TARGET_AVX2 __attribute__((always_inline)) inline f32x16 fma_avx2(f32x16 a, f32x16 b, f32x16 c) {
  const f32x8 lo = _mm256_fmadd_ps(__builtin_shufflevector(a, a, FP8LAB_SEQ8(0)), __builtin_shufflevector(b, b, FP8LAB_SEQ8(0)),
                                   __builtin_shufflevector(c, c, FP8LAB_SEQ8(0)));
  const f32x8 hi = _mm256_fmadd_ps(__builtin_shufflevector(a, a, FP8LAB_SEQ8(8)), __builtin_shufflevector(b, b, FP8LAB_SEQ8(8)),
                                   __builtin_shufflevector(c, c, FP8LAB_SEQ8(8)));
  return __builtin_shufflevector(lo, hi, FP8LAB_SEQ16(0));
}

// int8 addition saturating at -128 and 127.
FP8LAB_TARGET_AVX512 __attribute__((always_inline)) inline i8x64 adds_avx512(i8x64 x, i8x64 y) {
  return (i8x64)_mm512_adds_epi8((__m512i)x, (__m512i)y);
}
FP8LAB_TARGET_AVX2 __attribute__((always_inline)) inline i8x64 adds_avx2(i8x64 x, i8x64 y) {
  const i8x32 lo = (i8x32)_mm256_adds_epi8((__m256i)__builtin_shufflevector(x, x, FP8LAB_SEQ32(0)),
                                           (__m256i)__builtin_shufflevector(y, y, FP8LAB_SEQ32(0)));
  const i8x32 hi = (i8x32)_mm256_adds_epi8((__m256i)__builtin_shufflevector(x, x, FP8LAB_SEQ32(32)),
                                           (__m256i)__builtin_shufflevector(y, y, FP8LAB_SEQ32(32)));
  return __builtin_shufflevector(lo, hi, FP8LAB_SEQ32(0), FP8LAB_SEQ32(32));
}

// *v in every lane.
FP8LAB_TARGET_AVX512 __attribute__((always_inline)) inline f32x16 splat_avx512(const float* v) { return _mm512_set1_ps(*v); }
FP8LAB_TARGET_AVX2 __attribute__((always_inline)) inline f32x16 splat_avx2(const float* v) {
  const f32x8 half = _mm256_broadcast_ss(v);
  return __builtin_shufflevector(half, half, FP8LAB_SEQ16(0));
}

// B's 32 bytes of one k (at b) in both halves: the same columns for both rows of a pair.
FP8LAB_TARGET_AVX512 __attribute__((always_inline)) inline i8x64 both_rows_avx512(const void* b) {
  return (i8x64)_mm512_maskz_broadcast_i64x4(static_cast<__mmask8>(-1), _mm256_loadu_si256(static_cast<const __m256i*>(b)));
}
FP8LAB_TARGET_AVX2 __attribute__((always_inline)) inline i8x64 both_rows_avx2(const void* b) {
  const i8x32 half = (i8x32)_mm256_loadu_si256(static_cast<const __m256i*>(b));
  return __builtin_shufflevector(half, half, FP8LAB_SEQ32(0), FP8LAB_SEQ32(0));
}

// A's bytes of one k (at a: the tile's 4 rows) for pair j: row 2j's byte in bytes 0-31, row
// 2j + 1's in bytes 32-63. AVX-512: the 4 bytes in every dword, then one in-lane byte shuffle
// (128-bit lanes 0-1 take byte 2j of their dword, lanes 2-3 byte 2j + 1).
FP8LAB_TARGET_AVX512 __attribute__((always_inline)) inline i8x64 row_pair_avx512(const void* a, int j) {
  std::int32_t four;
  __builtin_memcpy(&four, a, 4);
  const __m512i spread = _mm512_set1_epi32(four);
  const i8x64 pick0 = {FP8LAB_REP32(0), FP8LAB_REP32(1)}, pick1 = {FP8LAB_REP32(2), FP8LAB_REP32(3)};
  return (i8x64)_mm512_shuffle_epi8(spread, (__m512i)(j == 0 ? pick0 : pick1));
}
FP8LAB_TARGET_AVX2 __attribute__((always_inline)) inline i8x64 row_pair_avx2(const void* a, int j) {
  const auto* bytes = static_cast<const char*>(a);
  const i8x32 lo = (i8x32)_mm256_set1_epi8(bytes[2 * j]), hi = (i8x32)_mm256_set1_epi8(bytes[2 * j + 1]);
  return __builtin_shufflevector(lo, hi, FP8LAB_SEQ32(0), FP8LAB_SEQ32(32));
}

// Bytes [kFrom, kFrom + 16) of v (a row's half in the pair layout), sign-extended to int32, and
// back: int32 to int8 by truncation (the values fit). GCC 12 does these 4x conversions of
// vector extensions element by element, so AVX-512 takes its instructions (maskz forms: the
// plain ones read an uninitialized vector that GCC 12 warns of). The AVX2 build keeps the
// generic conversions (it is the tests' build; its speed does not matter).
template <int kFrom>
FP8LAB_TARGET_AVX512 __attribute__((always_inline)) inline i32x16 widen16_avx512(i8x64 v) {
  return (i32x16)_mm512_maskz_cvtepi8_epi32(static_cast<__mmask16>(-1),
                                            _mm512_maskz_extracti32x4_epi32(static_cast<__mmask8>(-1), (__m512i)v, kFrom / 16));
}
template <int kFrom>
FP8LAB_TARGET_AVX2 __attribute__((always_inline)) inline i32x16 widen16_avx2(i8x64 v) {
  return __builtin_convertvector(__builtin_shufflevector(v, v, FP8LAB_SEQ16(kFrom)), i32x16);
}
FP8LAB_TARGET_AVX512 __attribute__((always_inline)) inline i8x16 narrow16_avx512(i32x16 v) {
  return (i8x16)_mm512_maskz_cvtepi32_epi8(static_cast<__mmask16>(-1), (__m512i)v);
}
FP8LAB_TARGET_AVX2 __attribute__((always_inline)) inline i8x16 narrow16_avx2(i32x16 v) { return __builtin_convertvector(v, i8x16); }

// The count's step (gemm_fp8_nt_floor.cpp): n - 1 in the lanes where sum > t (the products
// that do not count). AVX-512: a compare into a mask and a masked subtraction.
FP8LAB_TARGET_AVX512 __attribute__((always_inline)) inline i8x64 count_step_avx512(i8x64 n, i8x64 sum, i8x64 t) {
  const __mmask64 above = _mm512_cmpgt_epi8_mask((__m512i)sum, (__m512i)t);
  return (i8x64)_mm512_mask_sub_epi8((__m512i)n, above, (__m512i)n, _mm512_set1_epi8(1));
}
FP8LAB_TARGET_AVX2 __attribute__((always_inline)) inline i8x64 count_step_avx2(i8x64 n, i8x64 sum, i8x64 t) {
  return n + (i8x64)(sum > t);  // a true comparison is -1
}

// ---- both targets -------------------------------------------------------------------------
__attribute__((always_inline)) inline i8x64 max_i8(i8x64 x, i8x64 y) { return x > y ? x : y; }
__attribute__((always_inline)) inline i8x64 min_i8(i8x64 x, i8x64 y) { return x < y ? x : y; }
__attribute__((always_inline)) inline i32x16 max_i32(i32x16 x, i32x16 y) { return x > y ? x : y; }

// Four 16-byte pieces in order: a pair's (row 2j half 0, half 1, row 2j + 1 half 0, half 1).
__attribute__((always_inline)) inline i8x64 concat4(i8x16 a, i8x16 b, i8x16 c, i8x16 d) {
  return __builtin_shufflevector(__builtin_shufflevector(a, b, FP8LAB_SEQ32(0)), __builtin_shufflevector(c, d, FP8LAB_SEQ32(0)),
                                 FP8LAB_SEQ32(0), FP8LAB_SEQ32(32));
}

// What the floor window's count reads and updates (gemm_fp8_nt_floor.cpp): A's and B's
// signed-lsb bytes from the instruction's first k, the thresholds and the counts per pair.
struct CountOperands {
  const std::uint8_t* a_bytes = nullptr;
  const std::uint8_t* b_bytes = nullptr;
  const i8x64* threshold = nullptr;
  i8x64* counts = nullptr;
};

// The window's constants (gemm_fp8_nt_floor.cpp): bit patterns from the scale's, in uint32
// lanes (arithmetic wraps).
struct WindowConstants {
  i32x16 keep_mask, exponent_bias, scale_exponent;
  u32x16 unscale_from_scale, bias_from_scale, depth_minus_bias_from_scale;
};

__attribute__((always_inline)) inline WindowConstants window_constants(int F, std::int64_t depth) {
  WindowConstants c;
  c.keep_mask = i32x16{} + static_cast<std::int32_t>(~((1u << (23 - F)) - 1u));
  c.exponent_bias = i32x16{} + 127;
  c.scale_exponent = i32x16{} + (127 + F);
  c.unscale_from_scale = u32x16{} + (254u << 23);
  c.bias_from_scale = u32x16{} + ((277u << 23) | 0x400000u);
  c.depth_minus_bias_from_scale = static_cast<std::uint32_t>(depth) - c.bias_from_scale;
  return c;
}

// One 16-column piece before the FMAs: E = max(exponent(p), the products' maximum), the scale
// 2^(F-E) as a bit pattern, the accumulator's start bias + trunc(p 2^(F-E)) ulps; returns E.
__attribute__((always_inline)) inline i32x16 start_piece(const float* p, const i32x16& products_max, const WindowConstants& c,
                                                        u32x16& scale, f32x16& acc) {
  const f32x16 pv = FP8LAB_LOAD(f32x16, p);
  const i32x16 biased = (i32x16)(((u32x16)pv << 1) >> 24);
  const i32x16 e = max_i32(biased - c.exponent_bias, products_max);
  scale = (u32x16)(c.scale_exponent - e) << 23;
  const i32x16 truncated_p = __builtin_convertvector(pv * (f32x16)scale, i32x16);
  acc = (f32x16)(c.bias_from_scale - scale + (u32x16)truncated_p);
  return e;
}

// One 16-column piece after the FMAs: S = (acc - bias) / u + N, exact in FP32, F fraction bits
// kept (truncation), scaled by 2^(E-F), into p (gemm_fp8_nt_floor.cpp).
__attribute__((always_inline)) inline void finish_piece(float* p, f32x16 acc, u32x16 scale, i32x16 counts,
                                                        const WindowConstants& c) {
  const u32x16 sum = (u32x16)acc + scale + (c.depth_minus_bias_from_scale + (u32x16)counts);
  const i32x16 bits = (i32x16)__builtin_convertvector((i32x16)sum, f32x16) & c.keep_mask;
  FP8LAB_AT(f32x16, p) = (f32x16)bits * (f32x16)(c.unscale_from_scale - scale);
}

#define FP8LAB_WIDE_TARGET FP8LAB_TARGET_AVX512
#define FP8LAB_WIDE_NAME(name) name##_avx512
#include "kernels/cpu/gemm_fp8_nt_floor_wide_body.inc"
#undef FP8LAB_WIDE_TARGET
#undef FP8LAB_WIDE_NAME

#define FP8LAB_WIDE_TARGET FP8LAB_TARGET_AVX2
#define FP8LAB_WIDE_NAME(name) name##_avx2
#include "kernels/cpu/gemm_fp8_nt_floor_wide_body.inc"
#undef FP8LAB_WIDE_TARGET
#undef FP8LAB_WIDE_NAME

#undef FP8LAB_REP32
#undef FP8LAB_REP8
#undef FP8LAB_SEQ32
#undef FP8LAB_SEQ16
#undef FP8LAB_SEQ8
#undef FP8LAB_AT
#undef FP8LAB_LOAD

}  // namespace

FP8LAB_TARGET_AVX512 void tile_floor_wide_avx512(const FloorProblem& pr, std::int64_t row0, std::int64_t group) {
  tile_avx512(pr, row0, group);
}

FP8LAB_TARGET_AVX2 void tile_floor_wide_avx2(const FloorProblem& pr, std::int64_t row0, std::int64_t group) {
  tile_avx2(pr, row0, group);
}

FP8LAB_TARGET_AVX512 void tile_fp32_wide_avx512(const FloorProblem& pr, std::int64_t row0, std::int64_t group) {
  fp32_tile_avx512(pr, row0, group);
}

FP8LAB_TARGET_AVX2 void tile_fp32_wide_avx2(const FloorProblem& pr, std::int64_t row0, std::int64_t group) {
  fp32_tile_avx2(pr, row0, group);
}

}  // namespace fp8lab::cpu::detail
