#pragma once
// Test points for a narrow format: every positive representable value (from the spec
// table), the midpoints between neighbours, and the FP32 neighbours of all of those.
#include <cmath>
#include <limits>
#include <vector>

#include "tests/support/spec_values.hpp"

namespace fp8lab::test {

inline std::vector<float> positive_values(const TableFormat& f) {
  std::vector<float> values;
  const std::uint32_t magnitude_codes = 1u << (f.exponent_bits + f.mantissa_bits);
  for (std::uint32_t code = 0; code < magnitude_codes; ++code) {
    const double v = spec_value(code, f);
    if (std::isfinite(v)) values.push_back(static_cast<float>(v));
  }
  return values;  // increasing, as codes are
}

inline std::vector<float> midpoints(const TableFormat& f) {
  const std::vector<float> v = positive_values(f);
  std::vector<float> m;
  // The midpoint has one more significant bit than the format: exact in FP32.
  for (std::size_t i = 0; i + 1 < v.size(); ++i) m.push_back((v[i] + v[i + 1]) / 2.0f);
  return m;
}

// Values, midpoints (and the midpoint above max finite), their FP32 neighbours, both signs,
// plus zeros, infinities, NaN and the ends of FP32.
inline std::vector<float> boundary_points(const TableFormat& f) {
  std::vector<float> base = positive_values(f);
  const std::vector<float> mids = midpoints(f);
  base.insert(base.end(), mids.begin(), mids.end());
  const float max = base[positive_values(f).size() - 1];
  const float top_ulp = max - positive_values(f)[positive_values(f).size() - 2];
  base.push_back(max + top_ulp / 2);  // the overflow threshold (464 for E4M3, 61440 for E5M2)
  base.push_back(max + top_ulp);
  base.push_back(2 * max);
  constexpr float inf = std::numeric_limits<float>::infinity();
  std::vector<float> points;
  for (float v : base)
    for (float p : {v, std::nextafter(v, inf), std::nextafter(v, -inf)}) {
      points.push_back(p);
      points.push_back(-p);
    }
  for (float extra : {0.0f, -0.0f, inf, -inf, std::numeric_limits<float>::quiet_NaN(),
                      std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                      std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min()})
    points.push_back(extra);
  return points;
}

}  // namespace fp8lab::test
