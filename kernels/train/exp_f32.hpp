#pragma once
// exp for FP32 that vectorizes and gives the same bits on every machine and in every loop: the attention kernels
// call it on every score (flash attention's forward and its recomputing backward), where glibc's
// scalar expf (one call per element) was the step's largest single cost.
//
// Method (Cephes' expf, Moshier): n = floor(x log2(e) + 1/2); r = (x - n C1) - n C2 with
// C1 + C2 = ln 2 (C1 = 0.693359375 has 9 significant bits, so n C1 is exact and x - n C1 is exact
// by Sterbenz for |n| <= 127); e^r = 1 + r + r^2 P(r) with Cephes' degree-5 minimax P on
// |r| <= ln(2) / 2; the result e^r 2^n, the power of two applied as two exact factors so that
// results below FLT_MIN round once into the subnormals. Every operation is one IEEE FP32 add or
// multiply (the project compiles with -ffp-contract=off), floor and the bit manipulation are
// exact, and the branches are selects: a scalar call and a vectorized loop, on any ISA, compute
// the same bits. Accuracy: within 1 ulp of exp over the normal results (tests/unit/exp_f32_test
// checks it against FP64 exp); x > 88.72 gives inf, x < -103.97 gives 0, NaN stays NaN.
#include <cmath>
#include <cstdint>
#include <cstring>

namespace fp8lab::train {

inline float exp_f32(float x) {
  // Selects, not std::fmin / fmax (library calls that stop vectorization); NaN is handled at the end.
  // A NaN x fails both comparisons and becomes -104, so the float-to-int conversion below never
  // sees a NaN.
  const float clamped = x >= -104.0f ? (x <= 89.0f ? x : 89.0f) : -104.0f;
  const float n = std::floor(clamped * 1.44269504088896341f + 0.5f);
  float r = clamped - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  const float z = r * r;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * z + r + 1.0f;
  // 2^n = 2^lo 2^hi with hi = n clamped to the normal exponents [-126, 127] and lo = n - hi in
  // [-24, 1]: e 2^lo is exact, so the one multiply by 2^hi rounds once (into the subnormals, or
  // to inf).
  const auto ni = static_cast<std::int32_t>(n);
  const std::int32_t hi = ni < -126 ? -126 : (ni > 127 ? 127 : ni), lo = ni - hi;
  const auto pow2 = [](std::int32_t k) {  // 2^k for -126 <= k <= 127, built from its bits
    const std::uint32_t bits = static_cast<std::uint32_t>(k + 127) << 23;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  };
  float y = (e * pow2(lo)) * pow2(hi);
  y = x > 88.7228394f ? INFINITY : y;
  y = x < -103.972084f ? 0.0f : y;
  return x != x ? x : y;
}

// x[u] = exp_f32(x[u] * a - b) for u < n, vectorized: exp_f32.cpp is compiled with
// -fno-trapping-math, which lets GCC turn the selects into blends (results are unchanged: the
// option only stops floating-point exception flags from constraining the code).
void exp_f32_affine(float* x, std::int64_t n, float a, float b);

}  // namespace fp8lab::train
