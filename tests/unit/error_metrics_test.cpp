// Error metrics against values computed by hand, and against exact values (integer
// arithmetic) on inputs where the textbook formulas cancel.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "harness/metrics/error_metrics.hpp"

using namespace fp8lab;
using Catch::Detail::Approx;

TEST_CASE("error metrics: y = (1, 2, 3) against r = (1, 2, 4), by hand") {
  // e = (0, 0, -1): ||e|| = 1, ||r|| = sqrt(21); sum(y r) = 17, sum(y^2) = 14, sum(r^2) = 21.
  const std::vector<float> y = {1, 2, 3}, r = {1, 2, 4};
  const ErrorMetrics m = error_metrics(std::span<const float>(y), std::span<const float>(r), 0.0);
  CHECK(m.count == 3);
  CHECK(m.rel_frobenius == Approx(1.0 / std::sqrt(21.0)).epsilon(1e-15));
  CHECK(m.sqnr_db == Approx(10.0 * std::log10(21.0)).epsilon(1e-15));  // 13.222 dB
  CHECK(m.deepgemm_diff == Approx(1.0 / 35.0).epsilon(1e-15));  // 1 - 34/35 = sum(e^2) / 35
  CHECK(m.one_minus_cosine == Approx(1.0 - 17.0 / std::sqrt(14.0 * 21.0)).epsilon(1e-13));
  CHECK(m.max_abs == 1.0);
  CHECK(m.max_rel == 0.25);
  CHECK(m.rel_count == 3);
}

TEST_CASE("error metrics: the relative floor excludes small references and is reported") {
  const std::vector<double> y = {0.5, 2, 3}, r = {0.001, 2, 4};  // 0.001 -> 0.5 would dominate max_rel
  const ErrorMetrics m = error_metrics(std::span<const double>(y), std::span<const double>(r), 0.01);
  CHECK(m.max_rel == 0.25);
  CHECK(m.rel_count == 2);
  CHECK(m.rel_floor == 0.01);
  const ErrorMetrics none = error_metrics(std::span<const double>(y), std::span<const double>(r), 10.0);
  CHECK(none.rel_count == 0);
  CHECK(none.max_rel == 0.0);
}

TEST_CASE("error metrics: identical and all-zero inputs") {
  const std::vector<float> a = {1, -2, 3};
  const ErrorMetrics same = error_metrics(std::span<const float>(a), std::span<const float>(a), 0.0);
  CHECK(same.rel_frobenius == 0.0);
  CHECK(std::isinf(same.sqnr_db));
  CHECK(same.deepgemm_diff == 0.0);
  CHECK(same.one_minus_cosine == 0.0);
  const std::vector<float> zero = {0, 0, 0};
  const ErrorMetrics zz = error_metrics(std::span<const float>(zero), std::span<const float>(zero), 0.0);
  CHECK(zz.rel_frobenius == 0.0);
  CHECK(zz.deepgemm_diff == 0.0);
  CHECK(zz.one_minus_cosine == 0.0);
  const ErrorMetrics az = error_metrics(std::span<const float>(a), std::span<const float>(zero), 0.0);
  CHECK(std::isinf(az.rel_frobenius));
  CHECK(az.deepgemm_diff == 1.0);
  CHECK(az.one_minus_cosine == 1.0);
  const ErrorMetrics za = error_metrics(std::span<const float>(zero), std::span<const float>(a), 0.0);
  CHECK(za.one_minus_cosine == 1.0);
  CHECK(za.rel_frobenius == 1.0);
}

TEST_CASE("error metrics: sums are FP64 (FP32 sums would lose the 1e-8 differences)") {
  // 1e6 elements of 1 against 1 + 2^-23 (one FP32 ulp above 1): ||e||^2 = 1e6 * 2^-46.
  const std::size_t n = 1000000;
  const std::vector<float> y(n, 1.0f + 0x1p-23f), r(n, 1.0f);
  const ErrorMetrics m = error_metrics(std::span<const float>(y), std::span<const float>(r), 0.0);
  CHECK(m.rel_frobenius == Approx(0x1p-23).epsilon(1e-9));
}

// ---------------------------------------------------------------------------------------------
// Against exact values, on inputs where y is r plus a perturbation of a few units in the last
// place: where 1 - 2 sum(y r) / sum(y^2 + r^2) and sum(y r) / sqrt(sum(y^2) sum(r^2)) keep
// only an absolute accuracy of u = 2^-53 while the quantities are ~u^2.
//
// Inputs are integers (FP32: |r| in [2^23, 2^24), FP64: |r| in [2^52, 2^53)), y = r + p with
// |p| <= 2, so y - r = p is exact (Sterbenz) and every exact sum fits an __int128:
//   E = sum p^2, R = sum r^2, Y = sum y^2, P = sum y r,
//   Y R - P^2 = sum_(i<j) (y_i r_j - y_j r_i)^2 = sum_(i<j) (p_i r_j - p_j r_i)^2  (Lagrange),
// each (p_i r_j - p_j r_i)^2 < 2^110, so n <= 64 stays below 2^127. Exact values:
//   rel_frobenius = sqrt(E / R), sqnr_db = 10 log10(R / E), deepgemm_diff = E / (Y + R),
//   1 - cos = 1 - P / sqrt(Y R) = (Y R - P^2) / (sqrt(Y R) (sqrt(Y R) + P))   (P > 0),
// the last form free of cancellation. They are evaluated in x87 long double (64-bit
// significand, asserted): each integer converts with relative error <= 2^-64, and the at
// most 8 further operations (sqrt, products, a sum of two positive terms, quotient) keep the
// expected value within 12 * 2^-64 < 2^-60 of the exact one (relative): noise against the
// double-precision bounds below, which is added to them as 2^-59 |value|.
//
// Bounds for the computed values (gamma_k = k u / (1 - k u); sums run sequentially, so a sum
// of n non-negative terms each rounded once is within gamma_n relative):
//   rel_frobenius: sqrt(E(1+t1) / (R(1+t2)) (1+d1)) (1+d2), |t| <= gamma_n, |d| <= u
//                  -> relative (gamma_n + 2 u) (first order, 2 u covering the rest).
//   sqnr_db:       10 log10 of (R/E)(1 + 2 gamma_n + u); glibc's log10 is within 2 ulp and the
//                  product by 10 one rounding: 10 / ln(10) (2 gamma_(n+1)) + 4 u |value|.
//   deepgemm_diff: E(1+t1) / (S(1+t2)) (1+d), S's terms round 3 times: |t2| <= gamma_(n+2)
//                  -> relative gamma_(2n+3).
//   1 - cos:       the bound derived in harness/metrics/error_metrics.cpp: the computed
//                  d = (a - b)/b is within 2 gamma_(n+6) ||e|| / b (the sum of e (y + r) within
//                  gamma_(n+1) ||e|| ||y + r||, the norms within gamma_n / 2 + u); the i-th
//                  difference e_i - r_i d within (2 gamma_(n+6) + 2 u) |r_i| ||e|| / b + u |t_i|;
//                  so || computed t - t || / a <= h = (2 gamma_(n+6) + 2 u) ||e||/a + 2 u sqrt(2c)
//                  and, with the final sum and quotient (gamma_(2n+2)),
//                  |computed - c| <= sqrt(2c) h + h^2/2 + (c + sqrt(2c) h + h^2/2) gamma_(2n+2).
// The old formulas miss these by factors of 2^5 and more (checked: they fail every case).
namespace {

static_assert(std::numeric_limits<long double>::digits >= 64, "the exact values need x87 long double");
using i128 = __int128;
constexpr double u = 0x1p-53;
double gamma(int k) { return k * u / (1 - k * u); }

struct Exact {
  long double rel_frobenius, sqnr_db, deepgemm_diff, one_minus_cosine, e_over_a;
};

// r, y integers (exactly representable in the type under test), y - r small.
Exact exact_metrics(const std::vector<std::int64_t>& y, const std::vector<std::int64_t>& r) {
  i128 E = 0, R = 0, Y = 0, P = 0, L = 0;
  for (std::size_t i = 0; i < r.size(); ++i) {
    const i128 p = y[i] - r[i];
    E += p * p;
    R += i128{r[i]} * r[i];
    Y += i128{y[i]} * y[i];
    P += i128{y[i]} * r[i];
    for (std::size_t j = i + 1; j < r.size(); ++j) {
      const i128 cross = p * r[j] - i128{y[j] - r[j]} * r[i];
      L += cross * cross;
    }
  }
  const long double e = static_cast<long double>(E), rr = static_cast<long double>(R),
                    yy = static_cast<long double>(Y), pp = static_cast<long double>(P);
  const long double root = std::sqrt(yy) * std::sqrt(rr);
  Exact x{};
  x.rel_frobenius = std::sqrt(e / rr);
  x.sqnr_db = 10.0L * std::log10(rr / e);
  x.deepgemm_diff = e / (yy + rr);
  x.one_minus_cosine = P > 0 ? static_cast<long double>(L) / (root * (root + pp)) : 1.0L - pp / root;
  x.e_over_a = std::sqrt(e / yy);
  return x;
}

double omc_bound(double c, double e_over_a, int n) {
  const double s = std::sqrt(2 * c), h = (2 * gamma(n + 6) + 2 * u) * e_over_a + 2 * u * s;
  const double spread = s * h + h * h / 2;
  return spread + (c + spread) * gamma(2 * n + 2);
}

// Every metric of m against x, within the bounds above; `scale` 2^k multiplies y and r.
void check_against_exact(const ErrorMetrics& m, const Exact& x, int n) {
  const auto check = [](const char* name, double got, long double want, double bound) {
    const double err = std::fabs(static_cast<double>(got - want));
    INFO(name << ": computed " << got << ", exact " << static_cast<double>(want) << ", error " << err << ", bound "
              << bound << " (budget used " << 100.0 * err / bound << "%)");
    CHECK(err <= bound);
  };
  const auto noise = [](long double v) { return 0x1p-59 * std::fabs(static_cast<double>(v)); };
  check("rel_frobenius", m.rel_frobenius, x.rel_frobenius,
        (gamma(n) + 2 * u) * static_cast<double>(x.rel_frobenius) + noise(x.rel_frobenius));
  check("sqnr_db", m.sqnr_db, x.sqnr_db, 10.0 / std::log(10.0) * 2 * gamma(n + 1) + 4 * u * std::fabs(static_cast<double>(x.sqnr_db)) + noise(x.sqnr_db));
  check("deepgemm_diff", m.deepgemm_diff, x.deepgemm_diff,
        gamma(2 * n + 3) * static_cast<double>(x.deepgemm_diff) + noise(x.deepgemm_diff));
  check("one_minus_cosine", m.one_minus_cosine, x.one_minus_cosine,
        omc_bound(static_cast<double>(x.one_minus_cosine), static_cast<double>(x.e_over_a), n) + noise(x.one_minus_cosine));
}

// n integers with |r| in [2^(bits-1), 2^bits), random signs, and y = r + p, p in [-2, 2]
// chosen so that |y| stays below 2^bits (exact in a `bits`-bit significand).
void near_pair(std::mt19937_64& rng, int n, int bits, std::vector<std::int64_t>& y, std::vector<std::int64_t>& r) {
  y.assign(static_cast<std::size_t>(n), 0);
  r.assign(static_cast<std::size_t>(n), 0);
  const std::int64_t top = std::int64_t{1} << bits;
  for (int i = 0; i < n; ++i) {
    std::int64_t magnitude = (top >> 1) + static_cast<std::int64_t>(rng() >> (65 - bits));
    std::int64_t p = static_cast<std::int64_t>(rng() % 5) - 2;
    if (magnitude + p >= top) p = -p;
    const bool negative = rng() & 1;
    r[static_cast<std::size_t>(i)] = negative ? -magnitude : magnitude;
    y[static_cast<std::size_t>(i)] = negative ? -(magnitude + p) : magnitude + p;
  }
  if (y == r) y[0] += y[0] > 0 ? -1 : 1;  // at least one difference
}

template <class T>
std::vector<T> scaled(const std::vector<std::int64_t>& v, int k) {
  std::vector<T> out;
  for (std::int64_t x : v) out.push_back(static_cast<T>(std::ldexp(static_cast<double>(x), k)));  // exact
  return out;
}

}  // namespace

namespace {

// Pairs a few ulp apart in T (`bits` significant bits), n = 8 and 33, against exact values.
template <class T>
void check_near_pairs(std::uint64_t seed, int bits) {
  std::mt19937_64 rng(seed);
  for (const int n : {8, 33})
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<std::int64_t> y, r;
      near_pair(rng, n, bits, y, r);
      const std::vector<T> yt = scaled<T>(y, 0), rt = scaled<T>(r, 0);
      INFO("n " << n << ", trial " << trial);
      check_against_exact(error_metrics(std::span<const T>(yt), std::span<const T>(rt), 0.0), exact_metrics(y, r), n);
    }
}

}  // namespace

TEST_CASE("error metrics: FP32 inputs a few ulp apart, against exact values (n = 8, 33)") { check_near_pairs<float>(10, 24); }

TEST_CASE("error metrics: FP64 inputs a few ulp apart, against exact values (n = 8, 33)") { check_near_pairs<double>(11, 53); }

TEST_CASE("error metrics: the same inputs times 2^k (|x| from 1e-285 to 1e+287) give the same bits") {
  // Near 1e+-160 and beyond, squares overflow or underflow: the scaled sums must not.
  std::mt19937_64 rng(12);
  std::vector<std::int64_t> y, r;
  near_pair(rng, 16, 53, y, r);
  const std::vector<double> y0 = scaled<double>(y, 0), r0 = scaled<double>(r, 0);
  const ErrorMetrics base = error_metrics(std::span<const double>(y0), std::span<const double>(r0), 0.0);
  check_against_exact(base, exact_metrics(y, r), 16);
  for (const int k : {-1000, -600, -480, 480, 600, 900}) {
    const std::vector<double> yk = scaled<double>(y, k), rk = scaled<double>(r, k);
    const ErrorMetrics m = error_metrics(std::span<const double>(yk), std::span<const double>(rk), 0.0);
    INFO("k = " << k);
    CHECK(m.rel_frobenius == base.rel_frobenius);
    CHECK(m.sqnr_db == base.sqnr_db);
    CHECK(m.deepgemm_diff == base.deepgemm_diff);
    CHECK(m.one_minus_cosine == base.one_minus_cosine);
    CHECK(m.max_abs == std::ldexp(base.max_abs, k));
    CHECK(m.max_rel == base.max_rel);
  }
}

TEST_CASE("error metrics: y == r at huge, tiny and mixed magnitudes is exactly no error") {
  const std::vector<std::vector<double>> cases = {
      {1e300, -3e299, 1e300}, {1e-300, 5e-310, -2e-300}, {1e160, 1e-160, -1.0, 3e200, 0.0}, {-1e-170, 1e-170}};
  for (const std::vector<double>& v : cases) {
    const ErrorMetrics m = error_metrics(std::span<const double>(v), std::span<const double>(v), 0.0);
    INFO("first value " << v[0]);
    CHECK(m.rel_frobenius == 0.0);
    CHECK(m.sqnr_db == std::numeric_limits<double>::infinity());
    CHECK(m.deepgemm_diff == 0.0);
    CHECK(m.one_minus_cosine == 0.0);
    CHECK(m.max_abs == 0.0);
  }
}

TEST_CASE("error metrics: opposite, orthogonal and parallel vectors, against exact values") {
  // y = -r: diff = 4 R / 2 R = 2, 1 - cos = 2; y _|_ r: diff = 1, 1 - cos = 1; y = 3 r:
  // diff = 4 R / 10 R = 0.4, 1 - cos = 0 (bound: h^2/2 with c = 0, here ~1e-29).
  std::mt19937_64 rng(13);
  std::vector<std::int64_t> y, r;
  near_pair(rng, 12, 24, y, r);  // 24-bit integers: y - r exact, and every int128 term in range
  std::vector<std::int64_t> negated, orthogonal, tripled;
  for (std::size_t i = 0; i < r.size(); ++i) {
    negated.push_back(-r[i]);
    tripled.push_back(3 * r[i]);
    orthogonal.push_back(i % 2 ? r[i - 1] : -r[i + 1]);  // (-r1, r0, -r3, r2, ...)
  }
  for (const auto* v : {&negated, &orthogonal, &tripled}) {
    const std::vector<double> yd = scaled<double>(*v, 0), rd = scaled<double>(r, 0);
    const ErrorMetrics m = error_metrics(std::span<const double>(yd), std::span<const double>(rd), 0.0);
    INFO((v == &negated ? "y = -r" : v == &orthogonal ? "y orthogonal to r" : "y = 3 r"));
    check_against_exact(m, exact_metrics(*v, r), 12);
  }
}

TEST_CASE("error metrics: different lengths are refused") {
  const std::vector<float> a = {1, 2}, b = {1};
  CHECK_THROWS_WITH(error_metrics(std::span<const float>(a), std::span<const float>(b), 0.0),
                    Catch::Contains("against a reference of 1"));
}

TEST_CASE("ulp distance and bitwise comparison") {
  constexpr float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(ulp_distance(1.0f, std::nextafter(1.0f, 2.0f)) == 1);
  CHECK(ulp_distance(1.0f, 1.0f + 8 * 0x1p-23f) == 8);
  CHECK(ulp_distance(0.0f, -0.0f) == 0);
  CHECK(ulp_distance(0x1p-149f, -0x1p-149f) == 2);
  CHECK(ulp_distance(std::numeric_limits<float>::max(), inf) == 1);
  CHECK(ulp_distance(1.0f, 2.0f) == (1u << 23));

  const std::vector<float> y = {1.0f, 0.0f, nan, 2.0f, nan}, r = {1.0f, -0.0f, 1.0f, std::nextafter(2.0f, 0.0f), nan};
  const BitwiseComparison c = compare_bitwise(y, r);
  CHECK(c.count == 5);
  CHECK(c.mismatches == 3);  // +0 vs -0 differ in bits; NaN vs 1; 2 vs its neighbour. NaN == NaN (same bits) matches.
  CHECK(c.nan_mismatches == 1);
  CHECK(c.max_ulp == 1);
}
