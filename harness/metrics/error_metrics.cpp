#include "harness/metrics/error_metrics.hpp"

#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace fp8lab {
namespace {

template <class Y, class R>
ErrorMetrics compute(std::span<const Y> y, std::span<const R> r, double rel_floor) {
  if (y.size() != r.size())
    throw std::invalid_argument("error_metrics: " + std::to_string(y.size()) + " values against a reference of " +
                                std::to_string(r.size()));
  ErrorMetrics m;
  m.count = y.size();
  m.rel_floor = rel_floor;
  double err2 = 0, ref2 = 0, out2 = 0, cross = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    const double yi = static_cast<double>(y[i]), ri = static_cast<double>(r[i]);
    const double e = yi - ri;
    err2 += e * e;
    ref2 += ri * ri;
    out2 += yi * yi;
    cross += yi * ri;
    m.max_abs = std::max(m.max_abs, std::fabs(e));
    if (std::fabs(ri) > rel_floor) {
      ++m.rel_count;
      m.max_rel = std::max(m.max_rel, std::fabs(e) / std::fabs(ri));
    }
    if (std::isnan(e)) m.max_abs = m.max_rel = std::numeric_limits<double>::quiet_NaN();
  }
  const double inf = std::numeric_limits<double>::infinity();
  m.rel_frobenius = ref2 > 0 ? std::sqrt(err2 / ref2) : (err2 > 0 ? inf : 0.0);
  m.sqnr_db = err2 > 0 ? 10.0 * std::log10(ref2 / err2) : inf;
  m.deepgemm_diff = (out2 + ref2) > 0 ? 1.0 - 2.0 * cross / (out2 + ref2) : 0.0;
  m.cosine = (out2 > 0 && ref2 > 0) ? cross / std::sqrt(out2 * ref2) : (out2 == ref2 ? 1.0 : 0.0);
  return m;
}

// Maps FP32 bit patterns onto a line where adjacent floats are adjacent integers.
std::int64_t ordinal(float x) {
  const auto bits = std::bit_cast<std::uint32_t>(x);
  const auto magnitude = static_cast<std::int64_t>(bits & 0x7FFFFFFFu);
  return (bits >> 31) ? -magnitude : magnitude;
}

}  // namespace

ErrorMetrics error_metrics(std::span<const float> y, std::span<const float> r, double rel_floor) {
  return compute(y, r, rel_floor);
}
ErrorMetrics error_metrics(std::span<const float> y, std::span<const double> r, double rel_floor) {
  return compute(y, r, rel_floor);
}
ErrorMetrics error_metrics(std::span<const double> y, std::span<const double> r, double rel_floor) {
  return compute(y, r, rel_floor);
}

std::uint64_t ulp_distance(float a, float b) {
  const std::int64_t d = ordinal(a) - ordinal(b);
  return static_cast<std::uint64_t>(d < 0 ? -d : d);
}

BitwiseComparison compare_bitwise(std::span<const float> y, std::span<const float> r) {
  if (y.size() != r.size())
    throw std::invalid_argument("compare_bitwise: " + std::to_string(y.size()) + " values against " +
                                std::to_string(r.size()));
  BitwiseComparison c;
  c.count = y.size();
  for (std::size_t i = 0; i < y.size(); ++i) {
    if (std::bit_cast<std::uint32_t>(y[i]) != std::bit_cast<std::uint32_t>(r[i])) ++c.mismatches;
    const bool ny = std::isnan(y[i]), nr = std::isnan(r[i]);
    if (ny != nr) ++c.nan_mismatches;
    else if (!ny) c.max_ulp = std::max(c.max_ulp, ulp_distance(y[i], r[i]));
  }
  return c;
}

}  // namespace fp8lab
