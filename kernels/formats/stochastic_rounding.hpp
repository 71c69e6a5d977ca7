#pragma once
// Stochastic rounding of a scaled FP32 value into an element format (E4M3, E5M2, E2M1, E3M2,
// E2M3), reproducible anywhere from the seed and the element's index alone. Host+device code:
// the CPU and CUDA quantizers call these very functions; reference/stochastic_rounding_ref
// computes the same from the math (enumerated format values, FP64), sharing no code.
//
// Definition, for element (r, c) of a rows x cols tensor and a 64-bit seed:
// 1. i = r * cols + c (its row-major index in the whole tensor, not in its tile), and
//    w = mix64(seed + (i + 1) * 0x9E3779B97F4A7C15 mod 2^64): the (i + 1)-th output of SplitMix64
//    seeded with `seed` (Steele, Lea, Flood 2014; mix64 is its finalizer, constants below).
//    The draw u = w >> 32 is uniform on [0, 2^32). No generator state is carried from one
//    element to the next, so the codes depend on neither the thread count nor the tile order.
// 2. v is the scaled value exactly as under nearest rounding (fl32(x * encode) or fl32(x / encode)).
//    NaN: the codec's NaN code, as under nearest. |v| >= max_finite (inf included): +-max_finite,
//    the saturation of cvt.rn.satfinite (and of cvt.rs.satfinite): never rounded past it.
// 3. Otherwise q = 2^(max(floor(log2 |v|), emin) - M) is the format's spacing at |v| (emin the
//    exponent of the smallest normal, M the mantissa bits), lo = floor(|v| / q) q and
//    hi = lo + q are the representable neighbours with lo <= |v| < hi, and
//    F = floor(2^32 (|v| - lo) / q) is the discarded fraction as a 32-bit integer.
//    The magnitude is hi when u < F, else lo; the sign is v's (so -0 when it rounds to 0).
// Consequences: a representable |v| has F = 0 and never moves; P(hi) = F / 2^32, which is
// (|v| - lo) / q exactly whenever that fraction has at most 32 bits: always in the normal range
// (at most 23 - M bits), and in the subnormal range for |v| >= 2^(emin - M - 9). Below that (|v|
// under 2^-9 of the smallest subnormal) the expectation falls short of |v| by less than 2^-32 q.
#include <cstdint>

#include "kernels/formats/float_formats.hpp"
#include "kernels/formats/host_device.hpp"

namespace fp8lab {

enum class RoundingMode : std::uint8_t { nearest, stochastic };

// The quantizer's rounding of the scaled elements; nearest (RNE) is the default and its bits
// never depend on the seed.
struct Rounding {
  RoundingMode mode = RoundingMode::nearest;
  std::uint64_t seed = 0;
};

// SplitMix64's output function (the finalizer of Stafford's "Mix13" variant).
FP8LAB_HD constexpr std::uint64_t splitmix64_mix(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The (index + 1)-th output of SplitMix64 seeded with `seed` (mod 2^64 throughout).
FP8LAB_HD constexpr std::uint64_t splitmix64_output(std::uint64_t seed, std::uint64_t index) {
  constexpr std::uint64_t kGamma = 0x9E3779B97F4A7C15ull;  // SplitMix64's increment
  return splitmix64_mix(seed + (index + 1) * kGamma);
}

// The 32-bit draw u of element `index` (step 1 above).
FP8LAB_HD constexpr std::uint32_t stochastic_draw(std::uint64_t seed, std::uint64_t index) {
  return static_cast<std::uint32_t>(splitmix64_output(seed, index) >> 32);
}

// v rounded stochastically with draw u (steps 2 and 3), as an FP32 value the format holds
// (or NaN); the code is then encode<F> of it, whose RNE leaves such a value unchanged.
template <class F>
FP8LAB_HD constexpr float round_stochastic(float v, std::uint32_t u) {
  constexpr float kMax = max_finite<F>();
  constexpr int kEmin = FormatLayout<F>::min_exponent;
  const std::uint32_t sign = float_bits(v) & 0x80000000u;
  const std::uint32_t abs_bits = float_bits(v) & 0x7FFFFFFFu;
  const float a = float_from_bits(abs_bits);
  if (a != a) return v;
  if (!(a < kMax)) return float_from_bits(float_bits(kMax) | sign);
  // The exponent of the spacing; an FP32 subnormal (field 0) is far below every format's emin.
  const int exponent = static_cast<int>(abs_bits >> 23) - 127;
  const int spacing = (exponent > kEmin ? exponent : kEmin) - F::mantissa_bits;
  // |v| / q lies in [0, 2^(M + 1)): the power-of-two scaling, the floor and the difference are exact.
  const float t = a * exact_pow2(-spacing);
  const float whole = static_cast<float>(static_cast<std::uint32_t>(t));
  const auto fraction = static_cast<std::uint32_t>((t - whole) * 0x1p32f);  // F, truncated
  const float magnitude = (u < fraction ? whole + 1.0f : whole) * exact_pow2(spacing);
  return float_from_bits(float_bits(magnitude) | sign);
}

template <class F>
FP8LAB_HD constexpr std::uint32_t encode_stochastic(float v, std::uint32_t u) {
  return encode<F>(round_stochastic<F>(v, u));
}

// Spot checks: 1.125 lies a quarter of the way from 1 to 1.5 in E2M1 (F = 2^30); 2.5 halfway
// from 2 to 3; representable values and the saturation never move.
static_assert(round_stochastic<E2M1>(1.125f, 0x3FFFFFFFu) == 1.5f && round_stochastic<E2M1>(1.125f, 0x40000000u) == 1.0f);
static_assert(round_stochastic<E2M1>(-2.5f, 0x7FFFFFFFu) == -3.0f && round_stochastic<E2M1>(-2.5f, 0x80000000u) == -2.0f);
static_assert(round_stochastic<E4M3>(448.0f, 0u) == 448.0f && round_stochastic<E4M3>(500.0f, 0u) == 448.0f);
static_assert(round_stochastic<E4M3>(0x1p-9f, 0u) == 0x1p-9f && encode_stochastic<E2M1>(0.25f, 0xFFFFFFFFu) == 0x0);

}  // namespace fp8lab
