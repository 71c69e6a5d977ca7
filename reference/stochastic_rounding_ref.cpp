#include "reference/stochastic_rounding_ref.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace fp8lab::ref {
namespace {

// The non-negative values of the format, increasing, listed once per format.
const std::vector<double>& values_of(const FormatDefinition& format) {
  static std::mutex mutex;
  static std::map<std::string, std::vector<double>> cache;
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(format.name);
  if (it == cache.end()) it = cache.emplace(format.name, representable_values(format)).first;
  return it->second;
}

}  // namespace

std::uint32_t stochastic_draw_ref(std::uint64_t seed, std::uint64_t index) {
  // SplitMix64 (Steele, Lea, Flood, OOPSLA 2014): the state advances by the odd constant
  // 0x9E3779B97F4A7C15 before each output; the output is the state through two xor-shift-
  // multiply steps and a final xor-shift. Output number index + 1 has state seed + (index + 1) gamma.
  std::uint64_t z = seed + (index + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z = z ^ (z >> 31);
  return static_cast<std::uint32_t>(z / 4294967296ull);  // the high 32 bits
}

double round_stochastic_ref(double v, const FormatDefinition& format, std::uint32_t u) {
  if (std::isnan(v)) return v;
  const double sign = std::signbit(v) ? -1.0 : 1.0;
  const double magnitude = std::fabs(v);
  if (magnitude >= format.max_finite) return sign * format.max_finite;
  const std::vector<double>& values = values_of(format);
  // hi: the first value above |v|; lo the one before it (values[0] = 0 <= |v|, max > |v|).
  const auto hi = std::upper_bound(values.begin(), values.end(), magnitude);
  const double upper = *hi, lower = *(hi - 1);
  // (|v| - lo) / (hi - lo): the gap is a power of two and |v| - lo is exact in FP64 (|v| has 24
  // significant bits and lo shares or lies below its binade); so the quotient and its
  // scaling by 2^32 are exact and floor gives the 32-bit fraction.
  const double fraction = std::floor(std::ldexp((magnitude - lower) / (upper - lower), 32));
  return sign * (static_cast<double>(u) < fraction ? upper : lower);
}

double round_element_ref(double v, const FormatDefinition& format, const RoundingRef& rounding, std::uint64_t index) {
  if (!rounding.stochastic) return round_to_format(v, format, /*saturate=*/true);
  return round_stochastic_ref(v, format, stochastic_draw_ref(rounding.seed, index));
}

}  // namespace fp8lab::ref
