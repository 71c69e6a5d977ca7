#pragma once
// UE8M0: an unsigned 8-bit exponent, value 2^(bits - 127), 0xFF is NaN, no zero
// (OCP MX scale format; DeepGEMM stores power-of-two scales this way).
#include <cstdint>

#include "kernels/formats/host_device.hpp"

namespace fp8lab {

inline constexpr std::uint8_t kUe8m0Nan = 0xFF;

// Every byte decodes: 0x00 is 2^-127, an FP32 subnormal, made from its bit pattern (no
// arithmetic, so a flush-to-zero build cannot turn it into 0); 0xFE is 2^127; 0xFF is NaN.
FP8LAB_HD constexpr float ue8m0_decode(std::uint8_t code) {
  return code == kUe8m0Nan ? float_from_bits(0x7FFFFFFFu) : exact_pow2(static_cast<int>(code) - 127);
}

// The smallest power of two >= s (DeepGEMM's ceil_to_ue8m0), for s > 0.
// As cvt.rp.satfinite.ue8m0: above 2^127 saturates to 0xFE, at or below 2^-127 gives 0x00
// (the smallest code: there is no zero). NaN, zero-or-negative and -inf are not scales: NaN code.
FP8LAB_HD constexpr std::uint8_t ue8m0_encode_ceil(float s) {
  const std::uint32_t bits = float_bits(s);
  if (bits > 0x7F800000u || (bits >> 31) || bits == 0) return kUe8m0Nan;
  if (bits >= 0x7F000000u) return 0xFE;             // > 2^127 or +inf: saturate
  if (bits <= (1u << 22)) return 0x00;              // <= 2^-127 (an FP32 subnormal)
  const int biased = static_cast<int>(bits >> 23);  // 0 for the FP32 subnormal 2^-127 < s < 2^-126
  const bool exact = (bits & 0x7FFFFFu) == 0;
  if (biased == 0) return 0x01;                     // 2^-127 < s < 2^-126 rounds up to 2^-126
  return static_cast<std::uint8_t>(exact ? biased : biased + 1);
}

// Rounds a positive FP32 value up to a power of two (the `pow2` scale rule); +inf and NaN
// pass through unchanged so that a non-finite tile propagates as it does under `fp32`.
FP8LAB_HD constexpr float ceil_pow2(float s) {
  return (float_bits(s) & 0x7FFFFFFFu) >= 0x7F800000u ? s : ue8m0_decode(ue8m0_encode_ceil(s));
}

static_assert(ue8m0_decode(127) == 1.0f && ue8m0_encode_ceil(1.0f) == 127);
static_assert(float_bits(ue8m0_decode(0x00)) == 0x00400000u && float_bits(ue8m0_decode(0xFE)) == 0x7F000000u);
static_assert(ue8m0_encode_ceil(1.5f) == 128 && ue8m0_encode_ceil(0.75f) == 127);

}  // namespace fp8lab
