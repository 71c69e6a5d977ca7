#pragma once
// Internal to the CPU block-scaled GEMM (gemm_block_scaled.cpp and its AVX2 steps,
// gemm_block_scaled_avx2.cpp): the arithmetic both the scalar and the vector instruction steps
// share, so that the two give the same bits by construction where they meet.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/block_scaled_mma.hpp"

namespace fp8lab::cpu::detail::block_scaled {

// 2^e as a double, for e in the normal range [-1022, 1023] (built from its bits: exact, fast).
inline double pow2(int e) { return std::bit_cast<double>(static_cast<std::uint64_t>(e + 1023) << 52); }

// floor(log2 |v|) of a nonzero finite float, exact (subnormals included).
inline int floor_log2(float v) {
  int e = 0;
  std::frexp(v, &e);
  return e - 1;
}

// The truncated sum S * 2^(E - F) rounded toward zero to FP32: subnormals kept, an overflow
// is inf, a zero is +0 (MMA-Sim's RZ-FP32 output).
inline float round_toward_zero_fp32(double v) {
  const double magnitude = std::fabs(v);
  float r = 0.0f;
  if (magnitude >= 0x1p128) {
    r = std::numeric_limits<float>::infinity();
  } else if (magnitude < 0x1p-126) {
    r = static_cast<float>(std::trunc(magnitude * 0x1p149) * 0x1p-149);
  } else {  // keep the 24 leading significant bits of the 53
    r = static_cast<float>(std::bit_cast<double>(std::bit_cast<std::uint64_t>(magnitude) & ~((std::uint64_t{1} << 29) - 1)));
  }
  if (r == 0.0f) return 0.0f;
  return v < 0 ? -r : r;
}

// x truncated toward zero, as an integer: exact for |x| < 2^63 (every term here is below 2^48:
// a product or group term is at most 4 (2304 for a group) times 2^F in units of 2^(E - F)),
// and one conversion instead of a libm trunc on CPUs without SSE4.1's roundsd.
inline std::int64_t truncated(double x) { return static_cast<std::int64_t>(x); }

// The accumulator's exponent as a term: FP32 exponent, -126 for subnormals, zero_exponent for 0.
inline int accumulator_exponent(float c, int zero_exponent) {
  if (c == 0.0f) return zero_exponent;
  // The biased exponent field less the bias is floor(log2 |c|) for a normal c and -127 for a
  // subnormal, which the max lifts to -126 (a finite c: the steps return inf and NaN first).
  const int biased = static_cast<int>((std::bit_cast<std::uint32_t>(c) >> 23) & 0xFFu);
  return std::max(biased - 127, -126);
}

// kind::mxf4nvf4's alignment, once each group's exact sum of products p_g and whether its
// products were all zero are known (the scalar and the AVX2 steps form those differently): the
// group terms p_g sig_s at exponents e_s (the zero exponent for an all-zero group or a zero
// scale product), the accumulator c a term too, all truncated to F fraction bits of the largest
// exponent, summed exactly and truncated to FP32. c must be finite (the steps return it first).
inline float mxf4nvf4_align_groups(float c, const double* group_sum, const bool* all_zero, const double* sig_a,
                                   const int* exp_a, const double* sig_b, const int* exp_b, const BlockScaledMma& mma) {
  const int groups = mma.depth / mma.group;
  double term[8];
  int exponent[8];
  int e_max = accumulator_exponent(c, mma.zero_exponent);
  for (int g = 0; g < groups; ++g) {
    const double scale_sig = sig_a[g] * sig_b[g];
    term[g] = group_sum[g] * scale_sig;
    exponent[g] = all_zero[g] || scale_sig == 0.0 ? mma.zero_exponent : exp_a[g] + exp_b[g];
    e_max = std::max(e_max, exponent[g]);
  }
  std::int64_t sum = truncated(static_cast<double>(c) * pow2(mma.fraction_bits - e_max));
  for (int g = 0; g < groups; ++g) sum += truncated(term[g] * pow2(exponent[g] + mma.fraction_bits - e_max));
  return round_toward_zero_fp32(static_cast<double>(sum) * pow2(e_max - mma.fraction_bits));
}

// One output row's and column's operands as the instructions read them: element values and
// exponents from the row's first K, the hardware scale blocks' significands and exponents.
struct OperandView {
  const float* value;
  const std::int16_t* exponent;
  const double* scale_sig;
  const int* scale_exp;
};

// One output: c over all instructions, each run by Steps::mxf8f6f4 or Steps::mxf4nvf4 (the
// scalar steps, or the AVX2 ones, which block_scaled_dot_avx2 instantiates inside its own
// AVX2 function so that they inline).
template <class Steps>
float dot_over_instructions(const OperandView& a, const OperandView& b, std::int64_t instructions,
                            std::int64_t blocks_per_instruction, const BlockScaledMma& mma) {
  float c = 0.0f;
  for (std::int64_t t = 0; t < instructions; ++t) {
    const std::int64_t k0 = t * mma.depth, blk = t * blocks_per_instruction;
    if (mma.kind == BlockScaledKind::mxf8f6f4)
      c = Steps::mxf8f6f4(c, a.value + k0, a.exponent + k0, b.value + k0, b.exponent + k0,
                          a.scale_exp[blk] + b.scale_exp[blk], mma);
    else
      c = Steps::mxf4nvf4(c, a.value + k0, b.value + k0, a.scale_sig + blk, a.scale_exp + blk, b.scale_sig + blk,
                          b.scale_exp + blk, mma);
  }
  return c;
}

// One output, c over all instructions, with the AVX2 steps (gemm_block_scaled_avx2.cpp): the
// scalar steps' arithmetic with the products of 8 elements at a time. Each product of two
// element values is exact in FP32 (at most 8 significant bits, magnitudes within
// [2^-32, 2^32]), each truncated term and every partial sum of them is an integer below 2^53 in
// FP64, and a group's sum of 16 E2M1 products is a multiple of 2^-2 below 2^10, so the sums are
// exact in any order and the result equals the scalar steps' bit for bit. Needs finite element
// values (gemm_block_scaled refuses others), a depth that is a multiple of 8 and at most 64
// and, for mxf4nvf4, groups that are multiples of 8, at most 8 of them.
float block_scaled_dot_avx2(const OperandView& a, const OperandView& b, std::int64_t instructions,
                            std::int64_t blocks_per_instruction, const BlockScaledMma& mma);

}  // namespace fp8lab::cpu::detail::block_scaled
