// The fused accumulation model (truncation) on 16 lanes: the micro-tile AVX-512 CPUs run.
//
// Same arithmetic as tile_fused_avx2 in gemm_fp8_nt_avx2.cpp (gemm_fp8_nt.cpp's file comment
// gives it): per instruction E = max(exponent(p), e_a + e_b), every term a_k b_k 2^(F-E)
// truncated to an integer and summed exactly, the sum normalized to F fraction bits. Only the
// layout differs: a 4-row x 8-column micro-tile is held as two vectors of 16 lanes, rows (0, 1)
// and (2, 3), so one instruction does the work of two 8-lane ones.
//
// Written with GCC vector extensions instead of intrinsics: the same source compiles to zmm
// code under the AVX-512 target and to pairs of ymm under AVX2. The AVX2 build is what the
// tests run on machines without AVX-512, so the 16-lane algorithm is checked bit for bit
// everywhere; the compiler keeps the semantics of each element-wise operation, so the AVX-512
// build computes the same bits (every operation is exact or one conversion per element, and
// nothing is reassociated: -ffp-contract=off, no -ffast-math).
#include <cstdint>

#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/cpu/gemm_microtile.hpp"

namespace fp8lab::cpu::detail {
namespace {

typedef float f32x16 __attribute__((vector_size(64)));
typedef std::int32_t i32x16 __attribute__((vector_size(64)));
typedef float f32x8 __attribute__((vector_size(32)));
typedef float f32x4 __attribute__((vector_size(16)));
typedef std::int16_t i16x32 __attribute__((vector_size(64)));
typedef std::int16_t i16x8 __attribute__((vector_size(16)));
typedef std::int16_t i16x4 __attribute__((vector_size(8)));
typedef std::int8_t i8x8 __attribute__((vector_size(8)));
typedef std::int8_t i8x4 __attribute__((vector_size(4)));

constexpr int kPairs = 2;  // row pairs per micro-tile: rows (0, 1) and (2, 3)

// Unaligned loads through may_alias types: no function returns a vector (its ABI would
// depend on the target), and no aliasing rule is broken.
typedef float f32x8_unaligned __attribute__((vector_size(32), aligned(4), may_alias));
typedef float f32x4_unaligned __attribute__((vector_size(16), aligned(4), may_alias));
typedef std::int8_t i8x8_unaligned __attribute__((vector_size(8), aligned(1), may_alias));
typedef std::int8_t i8x4_unaligned __attribute__((vector_size(4), aligned(1), may_alias));
#define FP8LAB_LOAD(type, from) (*reinterpret_cast<const type##_unaligned*>(from))

// Rows r and r + 1 of the state: lanes 0-7 row r, lanes 8-15 row r + 1.
#define FP8LAB_LOAD_PAIR(base, r)                                                                \
  __builtin_shufflevector(FP8LAB_LOAD(f32x8, (base) + (r) * pr.state_cols),                            \
                          FP8LAB_LOAD(f32x8, (base) + ((r) + 1) * pr.state_cols), 0, 1, 2, 3, 4, 5, 6, 7, \
                          8, 9, 10, 11, 12, 13, 14, 15)

// The body, inlined into one function per target (vector values never cross a call, so the
// two builds share no ABI).
__attribute__((always_inline)) inline void fused_wide(const GemmProblem& pr, std::int64_t row0, std::int64_t panel,
                                                     std::int64_t i_begin, std::int64_t i_end) {
  const int F = pr.model.fraction_bits;
  const i32x16 keep_mask = i32x16{} + static_cast<std::int32_t>(~((1u << (23 - F)) - 1u));
  f32x16 acc[kPairs], p[kPairs];
  float* const acc0 = pr.acc + row0 * pr.state_cols + panel * kPanel;
  float* const partial0 = pr.partial + row0 * pr.state_cols + panel * kPanel;
  for (int q = 0; q < kPairs; ++q) {
    acc[q] = FP8LAB_LOAD_PAIR(acc0, 2 * q);
    p[q] = FP8LAB_LOAD_PAIR(partial0, 2 * q);
  }
  for (std::int64_t i = i_begin; i < i_end; ++i) {
    const std::int64_t k0 = i * pr.depth;
    const float* bv = &pr.b.value[static_cast<std::size_t>((panel * pr.b.padded_k + k0) * kPanel)];
    const float* at = &pr.a.tile_value[static_cast<std::size_t>(((row0 / kRowsPerTile) * pr.a.padded_k + k0) * kRowsPerTile)];
    // E starts from exponent(p) (0 and subnormals: -126); the products raise it only where
    // the bound max_k e_a + max_k e_b exceeds it, so the exact max is skipped when no lane needs it.
    i32x16 e[kPairs];
    bool products_matter = false;
    const std::int32_t b_max = pr.b.instruction_max[static_cast<std::size_t>(panel * pr.instructions + i)];
    for (int q = 0; q < kPairs; ++q) {
      const i32x16 biased = ((i32x16)p[q] >> 23) & 0xFF;
      e[q] = (biased > 1 ? biased : 1) - 127;
      const std::int64_t r = row0 + 2 * q;
      const std::int32_t bound_lo = b_max + pr.a.instruction_max[static_cast<std::size_t>(r * pr.instructions + i)];
      const std::int32_t bound_hi = b_max + pr.a.instruction_max[static_cast<std::size_t>((r + 1) * pr.instructions + i)];
      for (int lane = 0; lane < 16; ++lane) products_matter |= (lane < 8 ? bound_lo : bound_hi) > e[q][lane];
    }
    if (products_matter) {
      // The 32 outputs' exponent maxima in int16 (sums of two int8 exponents, -252..30 for
      // every format pairing, E4M3 x E5M2 included (gemm_fp8_nt.cpp's file comment), never
      // overflow): element r * 8 + lane is output (row r, lane).
      const std::int8_t* ta = &pr.a.tile_exponent[static_cast<std::size_t>(((row0 / kRowsPerTile) * pr.a.padded_k + k0) * kRowsPerTile)];
      const std::int8_t* tb = &pr.b.lane_exponent[static_cast<std::size_t>((panel * pr.b.padded_k + k0) * kPanel)];
      i16x32 e16 = i16x32{} + std::int16_t{-32767 - 1};  // below every sum
      for (std::int64_t k = 0; k < pr.depth; ++k) {
        const i16x4 a4 = __builtin_convertvector(FP8LAB_LOAD(i8x4, ta + k * kRowsPerTile), i16x4);
        const i16x8 b8 = __builtin_convertvector(FP8LAB_LOAD(i8x8, tb + k * kPanel), i16x8);
        const i16x32 ea = __builtin_shufflevector(a4, a4, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2,
                                                  2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
        const i16x32 eb = __builtin_shufflevector(b8, b8, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5,
                                                  6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
        const i16x32 sum = ea + eb;
        e16 = sum > e16 ? sum : e16;
      }
      const i32x16 lo = __builtin_convertvector(
          __builtin_shufflevector(e16, e16, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), i32x16);
      const i32x16 hi = __builtin_convertvector(
          __builtin_shufflevector(e16, e16, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31), i32x16);
      e[0] = lo > e[0] ? lo : e[0];
      e[1] = hi > e[1] ? hi : e[1];
    }
    f32x16 scale[kPairs];
    i32x16 sum[kPairs];
    for (int q = 0; q < kPairs; ++q) {
      // 2^(F-E) from exponent bits; the floor at -64 is the one of tile_fused_avx2 (a lane with
      // E < -64 sums only zeros, whatever the operands' formats).
      e[q] = e[q] > -64 ? e[q] : -64;
      const i32x16 scale_bits = (127 + F - e[q]) << 23;
      scale[q] = (f32x16)scale_bits;
      sum[q] = __builtin_convertvector(p[q] * scale[q], i32x16);  // truncation toward zero
    }
    for (std::int64_t k = 0; k < pr.depth; ++k) {
      const f32x8 b8 = FP8LAB_LOAD(f32x8, bv + k * kPanel);
      const f32x16 b = __builtin_shufflevector(b8, b8, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
      const f32x4 a4 = FP8LAB_LOAD(f32x4, at + k * kRowsPerTile);
      const f32x16 a01 = __builtin_shufflevector(a4, a4, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
      const f32x16 a23 = __builtin_shufflevector(a4, a4, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
      sum[0] += __builtin_convertvector((a01 * b) * scale[0], i32x16);
      sum[1] += __builtin_convertvector((a23 * b) * scale[1], i32x16);
    }
    // |S| < 2^24 (vector_path_holds), so the conversion to FP32 is exact; keep F fraction bits
    // of the sign-magnitude pattern (truncation) and scale by 2^(E-F).
    for (int q = 0; q < kPairs; ++q) {
      const f32x16 s = __builtin_convertvector(sum[q], f32x16);
      const i32x16 kept = (i32x16)s & keep_mask;
      const i32x16 unscale_bits = (e[q] + 127 - F) << 23;
      p[q] = (f32x16)kept * (f32x16)unscale_bits;
    }
    if (promotes_after(pr, i)) {
      const std::int64_t j = interval_of(pr, i);
      const f32x8 sb8 = FP8LAB_LOAD(f32x8, &pr.b.scale[static_cast<std::size_t>((panel * pr.plan.intervals + j) * kPanel)]);
      const f32x16 sb = __builtin_shufflevector(sb8, sb8, 0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7);
      for (int q = 0; q < kPairs; ++q) {
        const std::int64_t r = row0 + 2 * q;
        const float sa_lo = pr.a.scale[static_cast<std::size_t>(r * pr.plan.intervals + j)];
        const float sa_hi = pr.a.scale[static_cast<std::size_t>((r + 1) * pr.plan.intervals + j)];
        const f32x16 s = f32x16{sa_lo, sa_lo, sa_lo, sa_lo, sa_lo, sa_lo, sa_lo, sa_lo,
                                sa_hi, sa_hi, sa_hi, sa_hi, sa_hi, sa_hi, sa_hi, sa_hi} * sb;
        for (int lane = 0; lane < 16; ++lane) acc[q][lane] = __builtin_fmaf(p[q][lane], s[lane], acc[q][lane]);
        p[q] = f32x16{};
      }
    }
  }
  for (int q = 0; q < kPairs; ++q)
    for (int half = 0; half < 2; ++half) {
      const std::int64_t offset = (2 * q + half) * pr.state_cols;
      for (int lane = 0; lane < 8; ++lane) {
        acc0[offset + lane] = acc[q][8 * half + lane];
        partial0[offset + lane] = p[q][8 * half + lane];
      }
    }
}

#undef FP8LAB_LOAD_PAIR
#undef FP8LAB_LOAD

}  // namespace

FP8LAB_TARGET_AVX512 void tile_fused_wide_avx512(const GemmProblem& pr, std::int64_t row0, std::int64_t panel,
                                                 std::int64_t i_begin, std::int64_t i_end) {
  fused_wide(pr, row0, panel, i_begin, i_end);
}

FP8LAB_TARGET_AVX2 void tile_fused_wide_avx2(const GemmProblem& pr, std::int64_t row0, std::int64_t panel,
                                             std::int64_t i_begin, std::int64_t i_end) {
  fused_wide(pr, row0, panel, i_begin, i_end);
}

}  // namespace fp8lab::cpu::detail
