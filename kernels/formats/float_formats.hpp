#pragma once
// Narrow binary floating-point formats: E4M3, E5M2 (OCP OFP8, CUDA cuda_fp8.h semantics),
// FP16 (IEEE binary16) and BF16, from and to FP32.
//
// Numerics contract (DESIGN.md section 2):
// - encode rounds to nearest, ties to even, from the exact FP32 value.
// - Saturation::satfinite clamps overflow and +-inf to +-max finite (the hardware's
//   cvt.rn.satfinite); Saturation::nosat gives NaN (E4M3, which has no inf) or +-inf.
// - Overflow means "the correctly rounded result exceeds max finite", so for E4M3 464
//   (the midpoint of 448 and the would-be 480) ties to 448 and anything above overflows.
// - Any NaN input gives the canonical NaN: every bit set but the sign (0x7F, 0x7FFF),
//   as CUDA's float path does; the sign of a NaN is dropped.
// - decode is exact (every code of these formats is an FP32 value).
//
// The encode body is branch-free (selects only), so the CPU quantizer's loops vectorize,
// and constexpr + FP8LAB_HD so the same code runs on the GPU and in static_asserts.
#include <cstdint>

#include "kernels/formats/host_device.hpp"

namespace fp8lab {

enum class Saturation { satfinite, nosat };

// Format traits. A "magnitude code" is the code with its sign bit cleared.
struct E4M3 {
  static constexpr int exponent_bits = 4, mantissa_bits = 3, bias = 7;
  static constexpr bool has_infinity = false;      // only S.1111.111 is special (NaN)
  static constexpr std::uint32_t max_finite_code = 0x7E;   // 448
  static constexpr const char* name = "e4m3";
};
struct E5M2 {
  static constexpr int exponent_bits = 5, mantissa_bits = 2, bias = 15;
  static constexpr bool has_infinity = true;
  static constexpr std::uint32_t max_finite_code = 0x7B;   // 57344
  static constexpr const char* name = "e5m2";
};
struct FP16 {
  static constexpr int exponent_bits = 5, mantissa_bits = 10, bias = 15;
  static constexpr bool has_infinity = true;
  static constexpr std::uint32_t max_finite_code = 0x7BFF;  // 65504
  static constexpr const char* name = "fp16";
};
struct BF16 {
  static constexpr int exponent_bits = 8, mantissa_bits = 7, bias = 127;
  static constexpr bool has_infinity = true;
  static constexpr std::uint32_t max_finite_code = 0x7F7F;
  static constexpr const char* name = "bf16";
};

template <class F>
struct FormatLayout {
  static constexpr int total_bits = 1 + F::exponent_bits + F::mantissa_bits;
  static constexpr std::uint32_t sign_bit = 1u << (total_bits - 1);
  static constexpr std::uint32_t magnitude_mask = sign_bit - 1u;
  static constexpr std::uint32_t canonical_nan = magnitude_mask;  // 0x7F, 0x7FFF
  static constexpr std::uint32_t infinity_code =                  // IEEE-style formats only
      ((1u << F::exponent_bits) - 1u) << F::mantissa_bits;
  static constexpr int min_exponent = 1 - F::bias;                 // of the smallest normal
  static constexpr std::uint32_t overflow_code = F::has_infinity ? infinity_code : canonical_nan;
};

// All-ones when `condition`, else zero: a select the compiler can vectorize as a blend.
FP8LAB_HD constexpr std::uint32_t mask_if(bool condition) { return 0u - static_cast<std::uint32_t>(condition); }

template <class F>
FP8LAB_HD constexpr std::uint32_t encode(float x, Saturation saturation = Saturation::satfinite) {
  using L = FormatLayout<F>;
  constexpr int drop = 23 - F::mantissa_bits;  // FP32 fraction bits the format cannot hold
  const std::uint32_t bits = float_bits(x);
  const std::uint32_t sign = (bits >> 31) << (L::total_bits - 1);
  const std::uint32_t abs_bits = bits & 0x7FFFFFFFu;

  // Target normal range: add just under half an ULP plus the kept LSB (ties to even), cut
  // the dropped bits; a carry out of the fraction correctly bumps the exponent. Rebias the
  // FP32 exponent field to the target's: code = biased_exponent << M | fraction.
  const std::uint32_t rounded = abs_bits + ((1u << (drop - 1)) - 1u) + ((abs_bits >> drop) & 1u);
  const std::int32_t normal_code =
      static_cast<std::int32_t>(rounded >> drop) - ((127 - F::bias) << F::mantissa_bits);

  // Target subnormal range, |x| < 2^emin: adding 2^(emin - M + 23) makes the FP32 ULP equal
  // the target's subnormal quantum 2^(emin - M), so FP32's own RNE addition rounds, and the
  // difference of the bit patterns is the code (2^M, the smallest normal, comes out right).
  constexpr float magic = exact_pow2(L::min_exponent - F::mantissa_bits + 23);
  const std::int32_t subnormal_code = static_cast<std::int32_t>(float_bits(float_from_bits(abs_bits) + magic)) -
                                      static_cast<std::int32_t>(float_bits(magic));
  const std::uint32_t below_normal = mask_if(abs_bits < float_bits(exact_pow2(L::min_exponent)));

  // The selects below are masks rather than ?: so that GCC vectorizes the quantizer loops.
  const auto magnitude = static_cast<std::uint32_t>((subnormal_code & static_cast<std::int32_t>(below_normal)) |
                                                    (normal_code & static_cast<std::int32_t>(~below_normal)));
  const std::uint32_t overflow = mask_if(static_cast<std::int32_t>(magnitude) > static_cast<std::int32_t>(F::max_finite_code));
  const std::uint32_t saturated = saturation == Saturation::satfinite ? F::max_finite_code : L::overflow_code;
  const std::uint32_t code = sign | (saturated & overflow) | (magnitude & ~overflow);
  const std::uint32_t is_nan = mask_if(abs_bits > 0x7F800000u);
  return (L::canonical_nan & is_nan) | (code & ~is_nan);
}

template <class F>
FP8LAB_HD constexpr bool is_nan_code(std::uint32_t code) {
  using L = FormatLayout<F>;
  const std::uint32_t magnitude = code & L::magnitude_mask;
  return F::has_infinity ? magnitude > L::infinity_code : magnitude == L::canonical_nan;
}

template <class F>
FP8LAB_HD constexpr float decode(std::uint32_t code) {
  using L = FormatLayout<F>;
  constexpr int M = F::mantissa_bits;
  const std::uint32_t magnitude = code & L::magnitude_mask;
  const std::uint32_t exponent_field = magnitude >> M;
  const std::uint32_t fraction = magnitude & ((1u << M) - 1u);
  const float sign = (code & L::sign_bit) ? -1.0f : 1.0f;
  if (is_nan_code<F>(code)) return float_from_bits(0x7FFFFFFFu);
  if (F::has_infinity && magnitude == L::infinity_code) return sign * float_from_bits(0x7F800000u);
  if (exponent_field == 0)  // subnormal: fraction * 2^(emin - M), exact in FP32
    return sign * static_cast<float>(fraction) * exact_pow2(L::min_exponent - M);
  const std::uint32_t fp32_bits =
      ((exponent_field + 127u - static_cast<std::uint32_t>(F::bias)) << 23) | (fraction << (23 - M));
  return sign * float_from_bits(fp32_bits);
}

template <class F>
FP8LAB_HD constexpr float max_finite() { return decode<F>(F::max_finite_code); }

// Run-time format choice for the quantizers and the CLI (the GEMM operand formats).
enum class Fp8Format { e4m3, e5m2 };

constexpr const char* format_name(Fp8Format f) { return f == Fp8Format::e4m3 ? E4M3::name : E5M2::name; }
constexpr float format_max(Fp8Format f) { return f == Fp8Format::e4m3 ? max_finite<E4M3>() : max_finite<E5M2>(); }

// Spot checks that the constexpr codec agrees with the spec table; the full check is in tests/.
static_assert(max_finite<E4M3>() == 448.0f && max_finite<E5M2>() == 57344.0f);
static_assert(max_finite<FP16>() == 65504.0f);
static_assert(encode<E4M3>(464.0f) == 0x7E && encode<E4M3>(464.0f, Saturation::nosat) == 0x7E);
static_assert(encode<E4M3>(465.0f, Saturation::nosat) == 0x7F);
static_assert(encode<E5M2>(61440.0f, Saturation::nosat) == 0x7C);
static_assert(decode<E4M3>(0x01) == 0.001953125f);  // 2^-9

}  // namespace fp8lab
