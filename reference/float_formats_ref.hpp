#pragma once
// FP64 reference for rounding real numbers into narrow binary floating-point formats,
// written from the definition of a floating-point number (sign, exponent, integral
// significand) with frexp/ldexp/floor only: no bit patterns, and no code shared with
// kernels/formats, so a bug there cannot hide here.
#include <cstdint>
#include <string>

namespace fp8lab::ref {

// A format as its specification table gives it (DESIGN.md section 2).
struct FormatDefinition {
  std::string name;
  int exponent_bits;
  int mantissa_bits;   // stored fraction bits
  int min_exponent;    // exponent of the smallest normal; subnormal quantum is 2^(min_exponent - mantissa_bits)
  double max_finite;
  bool has_infinity;   // otherwise overflow without saturation is NaN
};

const FormatDefinition& e4m3();   // max 448, min normal 2^-6, no inf
const FormatDefinition& e5m2();   // max 57344, min normal 2^-14
const FormatDefinition& fp16();   // max 65504, min normal 2^-14
const FormatDefinition& bf16();   // max (2 - 2^-7) 2^127, min normal 2^-126

// x rounded to the nearest value of the format, ties to the even significand.
// Overflow (a rounded magnitude above max_finite, or an infinite x) gives +-max_finite
// when saturate, else +-inf or NaN as the format allows. NaN gives NaN. Zero keeps its sign.
double round_to_format(double x, const FormatDefinition& format, bool saturate);

// The code (sign bit, biased exponent, fraction) of a value the format holds exactly,
// derived arithmetically from the value; NaN gives the canonical NaN (all bits but the sign).
std::uint32_t code_of_value(double value, const FormatDefinition& format);

}  // namespace fp8lab::ref
