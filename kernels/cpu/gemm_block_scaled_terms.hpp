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

// One output row's and column's operands as the instructions read them: element values and
// exponents from the row's first K, the hardware scale blocks' significands and exponents.
struct OperandView {
  const float* value;
  const std::int16_t* exponent;
  const double* scale_sig;
  const int* scale_exp;
};

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
