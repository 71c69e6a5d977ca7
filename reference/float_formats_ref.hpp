#pragma once
// FP64 reference for rounding real numbers into narrow binary floating-point formats,
// written from the definition of a floating-point number (sign, exponent, integral
// significand) with frexp/ldexp/floor only: no bit patterns, and no code shared with
// kernels/formats, so a bug there cannot hide here.
#include <cstdint>
#include <string>
#include <vector>

namespace fp8lab::ref {

// A format as its specification table gives it (DESIGN.md section 2).
struct FormatDefinition {
  std::string name;
  int exponent_bits;
  int mantissa_bits;   // stored fraction bits
  int min_exponent;    // exponent of the smallest normal; subnormal quantum is 2^(min_exponent - mantissa_bits)
  double max_finite;
  bool has_infinity;   // otherwise overflow without saturation is NaN
  bool has_nan = true; // false: every code is a number (the MX element formats)
};

const FormatDefinition& e4m3();   // max 448, min normal 2^-6, no inf
const FormatDefinition& e5m2();   // max 57344, min normal 2^-14
const FormatDefinition& fp16();   // max 65504, min normal 2^-14
const FormatDefinition& bf16();   // max (2 - 2^-7) 2^127, min normal 2^-126
// OCP MX v1.0 element formats: no inf, no NaN.
const FormatDefinition& e2m1();   // 0, 0.5, 1, 1.5, 2, 3, 4, 6
const FormatDefinition& e3m2();   // max 28, min normal 2^-2, min subnormal 2^-4
const FormatDefinition& e2m3();   // max 7.5, min normal 1, min subnormal 2^-3

// x rounded to the nearest value of the format, ties to the even significand.
// Overflow (a rounded magnitude above max_finite, or an infinite x) gives +-max_finite
// when saturate, else +-inf or NaN as the format allows. NaN gives NaN. Zero keeps its sign.
// A format with neither inf nor NaN can only saturate: saturate = false throws.
double round_to_format(double x, const FormatDefinition& format, bool saturate);

// The code (sign bit, biased exponent, fraction) of a value the format holds exactly,
// derived arithmetically from the value; NaN gives the canonical NaN (all bits but the sign),
// or, in a format without NaN, the code fp8lab's contract gives a NaN input: -0, the sign bit.
std::uint32_t code_of_value(double value, const FormatDefinition& format);

// A second rounding, by another route, for small formats: every non-negative finite value of
// the format, increasing (so the index of a value is its magnitude code), listed from the
// definition; and x rounded to the nearest of them, a tie going to the even index (the even
// significand), saturating beyond max_finite. NaN gives NaN; zero keeps its sign.
std::vector<double> representable_values(const FormatDefinition& format);
double round_by_enumeration(double x, const std::vector<double>& values);

}  // namespace fp8lab::ref
