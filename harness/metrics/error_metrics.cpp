#include "harness/metrics/error_metrics.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

namespace fp8lab {
namespace {

// How each metric is evaluated, and why none cancels (u = 2^-53, n elements, gamma_k = k u /
// (1 - k u); e_i = y_i - r_i is one rounding, exact when y_i and r_i are within a factor 2):
//
// - rel_frobenius = sqrt(E / R), E = sum e^2, R = sum r^2: sums of non-negative terms, each
//   within gamma_n (relative), so the result is within (n + 2) u of its value however small.
// - sqnr_db = 10 log10(R / E): the same two sums.
// - deepgemm_diff: DeepGEMM writes 1 - 2 sum(y r) / sum(y^2 + r^2), which subtracts two
//   numbers near 1 when y ~ r and keeps only an absolute accuracy of u. It equals
//   E / sum(y^2 + r^2) (since y^2 + r^2 - 2 y r = e^2), a ratio of two positive sums: within
//   (2 n + 3) u relative.
// - one_minus_cosine = 0.5 || y/a - r/b ||^2 with a = ||y||, b = ||r||. Forming y_i/a - r_i/b
//   from the two rounded quotients still loses: each carries an absolute error u |y_i| / a, so
//   the result has relative error ~ 4 u / ||y/a - r/b||, which is O(1) when y and r differ in
//   the last few bits. So the i-th difference is evaluated as the equal
//       y_i/a - r_i/b = (e_i - r_i d) / a,   d = (a - b) / b = sum e_i (y_i + r_i) / ((a + b) b)
//   (a - b = (a^2 - b^2) / (a + b) and a^2 - b^2 = sum (y_i - r_i)(y_i + r_i)): no difference of
//   two rounded quantities is left but e_i - r_i d itself, whose error is bounded by the error
//   of d, itself ~ gamma_n ||e|| / b. Bound (derived in tests/unit/error_metrics_test.cpp): with
//   c the exact value and h = (2 gamma_(n+6) + 2 u) ||e|| / a + 2 u sqrt(2 c),
//       |computed - c| <= sqrt(2 c) h + h^2 / 2 + (c + sqrt(2 c) h + h^2 / 2) gamma_(2n+2),
//   i.e. a few u (times n) relative whenever e is not nearly parallel to r, and an absolute
//   ~ n u ||e|| / ||y|| sqrt(c) when it is (where 1 - cos is ill-conditioned).
// - max_abs, max_rel: one rounding each, no sums.
//
// Scaling: the sums of pass 2 run on values multiplied by 2^-p (magnitude_exponent): E on
// e 2^-p_e, R on r 2^-p_r, sum(y^2 + r^2) and the cosine's sums on a scale shared by y and r
// (the cosine only needs y and r scaled by positive numbers, which leaves it unchanged; a
// shared one keeps y - r exact). So nothing overflows near 1e+-160 and beyond, and where the
// unscaled sums were representable the results are the same bits as without scaling.

double power_of_two(int p) { return std::ldexp(1.0, p); }

// 10 log10(x 2^(2 p)) for x > 0, through log10(x) only when x 2^(2 p) is not a normal double.
double decibels(double x, int p) {
  const double scaled = std::ldexp(x, 2 * p);
  if (std::isnormal(scaled) || x == 0) return 10.0 * std::log10(scaled);
  return 10.0 * std::log10(x) + 20.0 * p * std::log10(2.0);
}

template <class Y, class R>
ErrorMetrics compute(std::span<const Y> y, std::span<const R> r, double rel_floor) {
  if (y.size() != r.size())
    throw std::invalid_argument("error_metrics: " + std::to_string(y.size()) + " values against a reference of " +
                                std::to_string(r.size()));
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  const std::size_t n = y.size();
  ErrorMetrics m;
  m.count = n;
  m.rel_floor = rel_floor;

  // Pass 1: the maxima, which need no sums, and the magnitudes that set the scales of pass 2.
  double max_y = 0, max_r = 0;
  bool finite = true;
  for (std::size_t i = 0; i < n; ++i) {
    const double yi = static_cast<double>(y[i]), ri = static_cast<double>(r[i]);
    const double e = yi - ri;
    finite = finite && std::isfinite(yi) && std::isfinite(ri);
    max_y = std::max(max_y, std::fabs(yi));
    max_r = std::max(max_r, std::fabs(ri));
    m.max_abs = std::max(m.max_abs, std::fabs(e));
    if (std::fabs(ri) > rel_floor) {
      ++m.rel_count;
      m.max_rel = std::max(m.max_rel, std::fabs(e) / std::fabs(ri));
    }
    if (std::isnan(e)) m.max_abs = m.max_rel = nan;
  }
  if (!finite) {
    m.rel_frobenius = m.sqnr_db = m.deepgemm_diff = m.one_minus_cosine = nan;
    return m;
  }
  const int p_r = magnitude_exponent(max_r), p = magnitude_exponent(std::max(max_y, max_r));
  // e = y - r overflows only when |y| and |r| are near the largest double; then e is formed
  // from the scaled values instead (|y - r| 2^-p < 2, so 2^-(p+1) brings it below 1).
  const bool e_overflows = !std::isfinite(m.max_abs);
  const int p_e = e_overflows ? p + 1 : magnitude_exponent(m.max_abs);
  // The cosine's scale is shared (so that y - r stays the small exact difference when y ~ r)
  // unless |y| and |r| are 2^64 apart, where the smaller one's squares could underflow; then
  // each gets its own: 1 - cos is the same for any positive rescaling of y or of r.
  const int p_y = magnitude_exponent(max_y);
  const bool shared = std::abs(p_y - p_r) < 64 || max_y == 0 || max_r == 0;
  const double s = power_of_two(-p), s_e = power_of_two(-p_e), s_r = power_of_two(-p_r);
  const double cy = shared ? s : power_of_two(-p_y), cr = shared ? s : s_r;

  // Pass 2: every sum, in index order.
  double err2 = 0, ref2 = 0, both2 = 0, y2 = 0, r2 = 0, gap = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double yi = static_cast<double>(y[i]), ri = static_cast<double>(r[i]);
    const double es = e_overflows ? (yi * s - ri * s) * 0.5 : (yi - ri) * s_e;
    const double rs = ri * s_r;
    err2 += es * es;
    ref2 += rs * rs;
    const double yb = yi * s, rb = ri * s;
    both2 += yb * yb + rb * rb;
    const double yc = yi * cy, rc = ri * cr;
    y2 += yc * yc;
    r2 += rc * rc;
    gap += (yc - rc) * (yc + rc);
  }
  m.rel_frobenius = ref2 > 0 ? std::ldexp(std::sqrt(err2 / ref2), p_e - p_r) : (err2 > 0 ? inf : 0.0);
  m.sqnr_db = err2 > 0 ? decibels(ref2 / err2, p_r - p_e) : inf;
  m.deepgemm_diff = both2 > 0 ? std::ldexp(err2 / both2, 2 * (p_e - p)) : 0.0;

  // Pass 3: 1 - cos = 0.5 sum ((e_i - r_i d) / a)^2 on the cosine's scaled values.
  if (max_y == 0 || max_r == 0) {
    m.one_minus_cosine = (max_y == 0 && max_r == 0) ? 0.0 : 1.0;
  } else {
    const double a = std::sqrt(y2), b = std::sqrt(r2);
    const double d = gap / ((a + b) * b);
    double sum = 0;
    for (std::size_t i = 0; i < n; ++i) {
      const double yc = static_cast<double>(y[i]) * cy, rc = static_cast<double>(r[i]) * cr;
      const double t = (yc - rc) - rc * d;
      sum += t * t;
    }
    m.one_minus_cosine = 0.5 * (sum / y2);
  }
  return m;
}

template <class T>
double rms(std::span<const T> x) {
  if (x.empty()) return 0;
  double amax = 0;
  for (const T v : x) amax = std::max(amax, std::fabs(static_cast<double>(v)));
  if (!std::isfinite(amax)) return amax;
  const int p = magnitude_exponent(amax);
  const double s = power_of_two(-p);
  double sum = 0;
  for (const T v : x) {
    const double scaled = static_cast<double>(v) * s;
    sum += scaled * scaled;
  }
  return std::ldexp(std::sqrt(sum / static_cast<double>(x.size())), p);
}

// Maps FP32 bit patterns onto a line where adjacent floats are adjacent integers.
std::int64_t ordinal(float x) {
  const auto bits = std::bit_cast<std::uint32_t>(x);
  const auto magnitude = static_cast<std::int64_t>(bits & 0x7FFFFFFFu);
  return (bits >> 31) ? -magnitude : magnitude;
}

}  // namespace

int magnitude_exponent(double amax) {
  if (!(amax > 0) || !std::isfinite(amax)) return 0;
  int e = 0;
  std::frexp(amax, &e);  // amax = f 2^e, f in [0.5, 1)
  return std::clamp(e, -1021, 1023);
}

double root_mean_square(std::span<const float> x) { return rms(x); }
double root_mean_square(std::span<const double> x) { return rms(x); }

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
