#include "reference/float_formats_ref.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace fp8lab::ref {

const FormatDefinition& e4m3() {
  static const FormatDefinition f{"e4m3", 4, 3, -6, 448.0, false};
  return f;
}
const FormatDefinition& e5m2() {
  static const FormatDefinition f{"e5m2", 5, 2, -14, 57344.0, true};
  return f;
}
const FormatDefinition& fp16() {
  static const FormatDefinition f{"fp16", 5, 10, -14, 65504.0, true};
  return f;
}
const FormatDefinition& bf16() {
  static const FormatDefinition f{"bf16", 8, 7, -126, std::ldexp(2.0 - std::ldexp(1.0, -7), 127), true};
  return f;
}

const FormatDefinition& e2m1() {
  static const FormatDefinition f{"e2m1", 2, 1, 0, 6.0, false, false};
  return f;
}
const FormatDefinition& e3m2() {
  static const FormatDefinition f{"e3m2", 3, 2, -2, 28.0, false, false};
  return f;
}
const FormatDefinition& e2m3() {
  static const FormatDefinition f{"e2m3", 2, 3, 0, 7.5, false, false};
  return f;
}

namespace {

double overflow_value(double sign, const FormatDefinition& format, bool saturate) {
  if (saturate) return sign * format.max_finite;
  if (format.has_infinity) return sign * std::numeric_limits<double>::infinity();
  return std::numeric_limits<double>::quiet_NaN();
}

// Nearest integer to n >= 0, ties to even.
double round_half_even(double n) {
  const double lower = std::floor(n);
  const double remainder = n - lower;  // exact: n and lower share a binade or lower is 0
  if (remainder > 0.5) return lower + 1.0;
  if (remainder < 0.5) return lower;
  const bool lower_is_even = std::floor(lower / 2.0) * 2.0 == lower;
  return lower_is_even ? lower : lower + 1.0;
}

}  // namespace

double round_to_format(double x, const FormatDefinition& format, bool saturate) {
  if (!saturate && !format.has_infinity && !format.has_nan)
    throw std::invalid_argument(format.name + " has neither inf nor NaN: it can only saturate");
  if (std::isnan(x)) return std::numeric_limits<double>::quiet_NaN();
  const double sign = std::signbit(x) ? -1.0 : 1.0;
  if (std::isinf(x)) return overflow_value(sign, format, saturate);
  const double magnitude = std::fabs(x);
  if (magnitude == 0.0) return x;

  // magnitude = f * 2^e with f in [0.5, 1), so its leading bit has weight 2^(e-1).
  int e = 0;
  std::frexp(magnitude, &e);
  const int exponent = std::max(e - 1, format.min_exponent);  // subnormals share the min exponent
  const double quantum = std::ldexp(1.0, exponent - format.mantissa_bits);
  // magnitude / quantum is exact: dividing by a power of two only shifts the exponent.
  const double rounded = round_half_even(magnitude / quantum) * quantum;
  if (rounded > format.max_finite) return overflow_value(sign, format, saturate);
  return sign * rounded;
}

std::uint32_t code_of_value(double value, const FormatDefinition& format) {
  const int total_bits = 1 + format.exponent_bits + format.mantissa_bits;
  const std::uint32_t sign_bit = 1u << (total_bits - 1);
  if (std::isnan(value)) return format.has_nan ? sign_bit - 1u : sign_bit;
  const std::uint32_t sign = std::signbit(value) ? sign_bit : 0u;
  const double magnitude = std::fabs(value);
  const double significand_scale = std::ldexp(1.0, format.mantissa_bits);  // 2^M
  if (std::isinf(magnitude)) {
    if (!format.has_infinity) throw std::invalid_argument(format.name + " has no infinity");
    return sign | (((1u << format.exponent_bits) - 1u) << format.mantissa_bits);
  }
  if (magnitude < std::ldexp(1.0, format.min_exponent)) {
    // subnormal: biased exponent 0, fraction = magnitude / 2^(min_exponent - M)
    const double fraction = std::ldexp(magnitude, format.mantissa_bits - format.min_exponent);
    if (fraction != std::floor(fraction)) throw std::invalid_argument("value not in " + format.name);
    return sign | static_cast<std::uint32_t>(fraction);
  }
  int e = 0;
  std::frexp(magnitude, &e);
  const int exponent = e - 1;
  const double significand = std::ldexp(magnitude, format.mantissa_bits - exponent);  // in [2^M, 2^(M+1))
  if (significand != std::floor(significand)) throw std::invalid_argument("value not in " + format.name);
  // biased exponent = exponent - min_exponent + 1 (the bias is 1 - min_exponent)
  const auto biased = static_cast<std::uint32_t>(exponent - format.min_exponent + 1);
  const auto fraction = static_cast<std::uint32_t>(significand - significand_scale);
  return sign | (biased << format.mantissa_bits) | fraction;
}

std::vector<double> representable_values(const FormatDefinition& format) {
  // Subnormals: k quanta of 2^(min_exponent - M), k < 2^M; then each binade 2^e from the
  // minimum on, significands 1 + k / 2^M, until max_finite.
  const int m = format.mantissa_bits;
  std::vector<double> values;
  for (int k = 0; k < (1 << m); ++k) values.push_back(std::ldexp(k, format.min_exponent - m));
  for (int e = format.min_exponent;; ++e)
    for (int k = 0; k < (1 << m); ++k) {
      const double v = std::ldexp((1 << m) + k, e - m);
      if (v > format.max_finite) return values;
      values.push_back(v);
    }
}

double round_by_enumeration(double x, const std::vector<double>& values) {
  if (std::isnan(x)) return std::numeric_limits<double>::quiet_NaN();
  const double sign = std::signbit(x) ? -1.0 : 1.0;
  const double magnitude = std::fabs(x);
  if (magnitude >= values.back()) return sign * values.back();
  // values[i] <= magnitude < values[i + 1]
  const std::size_t i = static_cast<std::size_t>(std::upper_bound(values.begin(), values.end(), magnitude) - values.begin()) - 1;
  const double below = magnitude - values[i], above = values[i + 1] - magnitude;
  const std::size_t nearest = below < above ? i : above < below ? i + 1 : (i % 2 == 0 ? i : i + 1);
  return sign * values[nearest];
}

}  // namespace fp8lab::ref
