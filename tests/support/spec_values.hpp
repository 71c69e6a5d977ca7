#pragma once
// Values of narrow-format codes straight from the DESIGN.md format table, for tests:
// (-1)^S 2^(E - bias) (1 + F / 2^M), subnormals 2^(1 - bias) (F / 2^M), and the table's
// NaN / inf codes. Deliberately written out again here, not taken from kernels/ or reference/.
#include <cmath>
#include <cstdint>
#include <limits>

namespace fp8lab::test {

struct TableFormat {
  int exponent_bits, mantissa_bits, bias;
  bool fn;  // E4M3 style: no inf, only S.1111.111 is NaN
  bool finite_only = false;  // MX element formats: no inf, no NaN, every code a number
};
inline constexpr TableFormat kE4M3Table{4, 3, 7, true};
inline constexpr TableFormat kE5M2Table{5, 2, 15, false};
inline constexpr TableFormat kFP16Table{5, 10, 15, false};
inline constexpr TableFormat kBF16Table{8, 7, 127, false};
inline constexpr TableFormat kE2M1Table{2, 1, 1, true, true};
inline constexpr TableFormat kE3M2Table{3, 2, 3, true, true};
inline constexpr TableFormat kE2M3Table{2, 3, 1, true, true};

inline double spec_value(std::uint32_t code, const TableFormat& f) {
  const std::uint32_t fraction = code & ((1u << f.mantissa_bits) - 1u);
  const std::uint32_t exponent = (code >> f.mantissa_bits) & ((1u << f.exponent_bits) - 1u);
  const bool negative = (code >> (f.exponent_bits + f.mantissa_bits)) & 1u;
  const std::uint32_t all_ones = (1u << f.exponent_bits) - 1u;
  const double sign = negative ? -1.0 : 1.0;
  const bool specials = !f.finite_only && exponent == all_ones;
  if (specials && f.fn && fraction == (1u << f.mantissa_bits) - 1u) return std::numeric_limits<double>::quiet_NaN();
  if (specials && !f.fn)
    return fraction ? std::numeric_limits<double>::quiet_NaN() : sign * std::numeric_limits<double>::infinity();
  const double f_part = static_cast<double>(fraction) / std::ldexp(1.0, f.mantissa_bits);
  if (exponent == 0) return sign * std::ldexp(f_part, 1 - f.bias);
  return sign * std::ldexp(1.0 + f_part, static_cast<int>(exponent) - f.bias);
}

// Same value, same sign of zero, or both NaN.
inline bool same_value(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

}  // namespace fp8lab::test
