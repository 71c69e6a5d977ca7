// Error metrics against values computed by hand.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
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
  CHECK(m.deepgemm_diff == Approx(1.0 - 34.0 / 35.0).epsilon(1e-14));  // 1/35
  CHECK(m.cosine == Approx(17.0 / std::sqrt(14.0 * 21.0)).epsilon(1e-15));
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
  CHECK(same.cosine == Approx(1.0).epsilon(1e-15));
  const std::vector<float> zero = {0, 0, 0};
  const ErrorMetrics zz = error_metrics(std::span<const float>(zero), std::span<const float>(zero), 0.0);
  CHECK(zz.rel_frobenius == 0.0);
  CHECK(zz.cosine == 1.0);
  const ErrorMetrics az = error_metrics(std::span<const float>(a), std::span<const float>(zero), 0.0);
  CHECK(std::isinf(az.rel_frobenius));
  CHECK(az.deepgemm_diff == 1.0);
}

TEST_CASE("error metrics: sums are FP64 (FP32 sums would lose the 1e-8 differences)") {
  // 1e6 elements of 1 against 1 + 2^-23 (one FP32 ulp above 1): ||e||^2 = 1e6 * 2^-46.
  const std::size_t n = 1000000;
  const std::vector<float> y(n, 1.0f + 0x1p-23f), r(n, 1.0f);
  const ErrorMetrics m = error_metrics(std::span<const float>(y), std::span<const float>(r), 0.0);
  CHECK(m.rel_frobenius == Approx(0x1p-23).epsilon(1e-9));
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
