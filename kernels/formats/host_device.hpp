#pragma once
// Lets one function body serve host and device code: nvcc sees __host__ __device__,
// a plain C++ compiler sees nothing.
#if defined(__CUDACC__)
#define FP8LAB_HD __host__ __device__
#else
#define FP8LAB_HD
#endif

#include <cstdint>

namespace fp8lab {

FP8LAB_HD constexpr std::uint32_t float_bits(float x) { return __builtin_bit_cast(std::uint32_t, x); }
FP8LAB_HD constexpr float float_from_bits(std::uint32_t b) { return __builtin_bit_cast(float, b); }

// 2^k exactly, for every k an FP32 can hold (-149 <= k <= 127), subnormals included.
FP8LAB_HD constexpr float exact_pow2(int k) {
  return k >= -126 ? float_from_bits(static_cast<std::uint32_t>(k + 127) << 23)
                   : float_from_bits(1u << (k + 149));
}

}  // namespace fp8lab
