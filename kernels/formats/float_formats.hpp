#pragma once
// Narrow binary floating-point formats, from and to FP32: E4M3, E5M2 (OCP OFP8, CUDA
// cuda_fp8.h semantics), FP16 (IEEE binary16), BF16, and the Blackwell MX/NVFP4 element
// formats E2M1 (FP4), E3M2 and E2M3 (FP6), which have no inf and no NaN (OCP MX v1.0).
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
// E2M1, E3M2, E2M3 (every code finite; one code per uint8, in the low 4 or 6 bits with the
// sign the highest of them; encode leaves the bits above zero, decode ignores them):
// - Saturating is the only mode: there is no code an unsaturated overflow could give, and
//   the MX and NVFP4 recipes (and cvt.rn.satfinite.e2m1x2 / e3m2x2 / e2m3x2, which has no
//   other form) saturate. So encode<F>(x) is the whole interface; encode<F>(x, saturation)
//   is deleted for these formats, so a caller that expects nosat's inf or NaN on overflow
//   fails to compile instead of getting max finite in silence.
// - +-inf saturates to +-max finite (6, 28, 7.5) like any overflow.
// - NaN (either sign, any payload) gives the code of -0 (the sign bit alone: 0x8, 0x20),
//   which decodes to -0. ml_dtypes 0.6 (float4_e2m1fn, float6_*_fn) makes the same choice
//   for positive NaNs; it gives +0 for negative ones (tests/peers records this). A NaN is
//   not a value these formats hold: a quantizer must catch it before the element codec
//   (the MX scale carries it as E8M0 0xFF; the harness rejects non-finite input).
// - -0 encodes to the sign bit alone, and values that round to zero keep their sign.
//
// The encode body is branch-free (selects only), so the CPU quantizer's loops vectorize,
// and constexpr + FP8LAB_HD so the same code runs on the GPU and in static_asserts.
#include <cstdint>
#if defined(__CUDACC__)
#include <cuda_fp8.h>
#endif

#include "kernels/formats/host_device.hpp"

namespace fp8lab {

enum class Saturation { satfinite, nosat };

// Format traits. A "magnitude code" is the code with its sign bit cleared.
struct E4M3 {
  static constexpr int exponent_bits = 4, mantissa_bits = 3, bias = 7;
  static constexpr bool has_infinity = false;      // only S.1111.111 is special (NaN)
  static constexpr bool has_nan = true;
  static constexpr std::uint32_t max_finite_code = 0x7E;   // 448
  static constexpr const char* name = "e4m3";
};
struct E5M2 {
  static constexpr int exponent_bits = 5, mantissa_bits = 2, bias = 15;
  static constexpr bool has_infinity = true;
  static constexpr bool has_nan = true;
  static constexpr std::uint32_t max_finite_code = 0x7B;   // 57344
  static constexpr const char* name = "e5m2";
};
struct FP16 {
  static constexpr int exponent_bits = 5, mantissa_bits = 10, bias = 15;
  static constexpr bool has_infinity = true;
  static constexpr bool has_nan = true;
  static constexpr std::uint32_t max_finite_code = 0x7BFF;  // 65504
  static constexpr const char* name = "fp16";
};
struct BF16 {
  static constexpr int exponent_bits = 8, mantissa_bits = 7, bias = 127;
  static constexpr bool has_infinity = true;
  static constexpr bool has_nan = true;
  static constexpr std::uint32_t max_finite_code = 0x7F7F;
  static constexpr const char* name = "bf16";
};

// The MX / NVFP4 element formats: every code is a finite number.
struct E2M1 {  // FP4: 0, 0.5, 1, 1.5, 2, 3, 4, 6
  static constexpr int exponent_bits = 2, mantissa_bits = 1, bias = 1;
  static constexpr bool has_infinity = false, has_nan = false;
  static constexpr std::uint32_t max_finite_code = 0x7;    // 6
  static constexpr const char* name = "e2m1";
};
struct E3M2 {  // FP6: min normal 2^-2, min subnormal 2^-4
  static constexpr int exponent_bits = 3, mantissa_bits = 2, bias = 3;
  static constexpr bool has_infinity = false, has_nan = false;
  static constexpr std::uint32_t max_finite_code = 0x1F;   // 28
  static constexpr const char* name = "e3m2";
};
struct E2M3 {  // FP6: min normal 1, min subnormal 2^-3
  static constexpr int exponent_bits = 2, mantissa_bits = 3, bias = 1;
  static constexpr bool has_infinity = false, has_nan = false;
  static constexpr std::uint32_t max_finite_code = 0x1F;   // 7.5
  static constexpr const char* name = "e2m3";
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
  // What nosat gives on overflow; formats with neither inf nor NaN have no nosat.
  static constexpr bool has_nosat = F::has_infinity || F::has_nan;
  static constexpr std::uint32_t overflow_code = F::has_infinity ? infinity_code : canonical_nan;
  // What a NaN input gives: the canonical NaN, or -0 where the format has no NaN (see top).
  static constexpr std::uint32_t nan_input_code = F::has_nan ? canonical_nan : sign_bit;
};

// All-ones when `condition`, else zero: a select the compiler can vectorize as a blend.
FP8LAB_HD constexpr std::uint32_t mask_if(bool condition) { return 0u - static_cast<std::uint32_t>(condition); }

namespace detail {

template <class F>
FP8LAB_HD constexpr std::uint32_t encode_rn(float x, Saturation saturation) {
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
  return (L::nan_input_code & is_nan) | (code & ~is_nan);
}

}  // namespace detail

// x rounded to nearest even, overflow saturated: valid for every format.
template <class F>
FP8LAB_HD constexpr std::uint32_t encode(float x) {
  return detail::encode_rn<F>(x, Saturation::satfinite);
}

template <class F>
  requires FormatLayout<F>::has_nosat
FP8LAB_HD constexpr std::uint32_t encode(float x, Saturation saturation) {
  return detail::encode_rn<F>(x, saturation);
}

// E2M1 / E3M2 / E2M3 saturate always (see top): call encode<F>(x).
template <class F>
  requires(!FormatLayout<F>::has_nosat)
std::uint32_t encode(float x, Saturation saturation) = delete;

template <class F>
FP8LAB_HD constexpr bool is_nan_code(std::uint32_t code) {
  using L = FormatLayout<F>;
  const std::uint32_t magnitude = code & L::magnitude_mask;
  if (!F::has_nan) return false;
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

// encode<E2M1>(x) in about half the operations, for the GPU quantizer (Hopper has no E2M1
// conversion instruction, and the NVFP4 kernel is issue-bound). E2M1's magnitudes are
// multiples of a quantum q: 0.5 below 2, 1 in [2, 4), 2 from 4. Adding M = q * 2^23 to |x| (an
// FP32 whose ULP is q) rounds |x| to a multiple of q, ties to even, in FP32's own addition, and
// bits(|x| + M) - bits(M) counts the quanta k; the code is k plus the codes below the range
// (0, 2, 4), capped at 7 (6.0), which also catches every |x| >= 2^24 and inf (their sums leave
// M's binade, so the difference of the patterns is huge). A NaN gives the sign bit alone, as
// encode<E2M1>. Ties: 0.25 -> 0, 0.75 -> 1.0, 1.25 -> 1.0, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4,
// as RNE. Checked against the FP64 reference on all 2^32 patterns (tests/slow).
FP8LAB_HD constexpr std::uint32_t encode_e2m1_by_quantum_add(float x) {
  const std::uint32_t bits = float_bits(x), abs_bits = bits & 0x7FFFFFFFu;
  const float a = float_from_bits(abs_bits);
  // M, and bits(M) minus the codes below M's range, for the three quanta.
  const float m = a < 2.0f ? 0x1p22f : (a < 4.0f ? 0x1p23f : 0x1p24f);
  const std::uint32_t base = a < 2.0f ? float_bits(0x1p22f) : (a < 4.0f ? float_bits(0x1p23f) - 2u : float_bits(0x1p24f) - 4u);
  const std::uint32_t k = float_bits(a + m) - base;
  const std::uint32_t magnitude = k < 7u ? k : 7u;
  const std::uint32_t sign = (bits >> 28) & 0x8u;
  return abs_bits > 0x7F800000u ? 0x8u : (sign | magnitude);
}

// encode<E4M3>(x) (satfinite): in device code on sm_89 and later the hardware's
// cvt.rn.satfinite.e4m3x2.f32, one instruction instead of the integer rounding's dozens (the
// GPU tests compare the two on all 2^32 FP32 patterns on every run: tests/gpu), elsewhere and
// in constant expressions encode<E4M3> itself. For the scale rules' E4M3 block scales.
FP8LAB_HD constexpr std::uint32_t encode_e4m3_satfinite(float x) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if (!__builtin_is_constant_evaluated()) return static_cast<std::uint32_t>(__nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3));
#endif
  return encode<E4M3>(x);
}

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
static_assert(max_finite<E2M1>() == 6.0f && max_finite<E3M2>() == 28.0f && max_finite<E2M3>() == 7.5f);
static_assert(decode<E2M1>(0x1) == 0.5f && decode<E3M2>(0x01) == 0.0625f && decode<E2M3>(0x01) == 0.125f);
static_assert(encode<E2M1>(5.0f) == 0x6 && encode<E2M1>(7.0f) == 0x7 && encode<E2M1>(-0.25f) == 0x8);
static_assert(encode_e2m1_by_quantum_add(5.0f) == 0x6 && encode_e2m1_by_quantum_add(1.75f) == 0x4 &&
              encode_e2m1_by_quantum_add(-0.25f) == 0x8 && encode_e2m1_by_quantum_add(3.0f) == 0x5);

}  // namespace fp8lab
