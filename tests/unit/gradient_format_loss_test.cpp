// harness/study/gradient_format_loss against counts and errors computed independently: thresholds of
// each format derived by hand from its definition and applied in an FP64 loop, FP16 rounding
// by the compiler's own _Float16 conversion, and tensors whose amax is chosen so that the
// current-scaling factor is an exact power of two.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "harness/study/gradient_format_loss.hpp"

using namespace fp8lab;

namespace {

// Magnitudes 2^u with u uniform in [lo, hi), random signs, every value an FP32 number.
std::vector<float> log_uniform(std::size_t n, double lo, double hi, unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<float> g(n);
  for (float& x : g) x = static_cast<float>((rng() & 1 ? -1.0 : 1.0) * std::exp2(u(rng)));
  return g;
}

std::vector<double> widen(const std::vector<float>& g) { return {g.begin(), g.end()}; }

struct Expected {
  std::int64_t flushed = 0, overflowed = 0, subnormal = 0;
};

// Thresholds on v = |g| 2^s, from the format's definition (round to nearest, ties to even):
//   smallest subnormal d: v <= d/2 rounds to 0 (the tie goes to the even 0);
//   smallest normal n: the largest subnormal is n - d, the midpoint to n is n - d/2, which ties
//     to n (even), so v < n - d/2 stays subnormal;
//   max finite M with ulp U: the midpoint M + U/2 ties away from M (M's last bit is odd) to
//     overflow, so v >= M + U/2 overflows.
Expected count_by_thresholds(const std::vector<float>& g, int s, double d, double n, double overflow_at) {
  Expected e;
  for (float x : g) {
    const double v = std::ldexp(std::fabs(static_cast<double>(x)), s);
    if (v <= d / 2) ++e.flushed;
    else if (v < n - d / 2) ++e.subnormal;
    if (v >= overflow_at) ++e.overflowed;
  }
  return e;
}

}  // namespace

TEST_CASE("gradient formats: names parse, unknown ones are refused") {
  CHECK(parse_gradient_format("fp16").kind == GradientFormat::Kind::fp16);
  CHECK(parse_gradient_format("e5m2").kind == GradientFormat::Kind::fp8_cast);
  const GradientFormat t = parse_gradient_format("e4m3:tile:1x128");
  CHECK(t.kind == GradientFormat::Kind::fp8_scaled);
  CHECK(t.granularity == Granularity::tile(128));
  CHECK(parse_gradient_format("e5m2:tensor").max_finite() == 57344.0);
  CHECK_THROWS_AS(parse_gradient_format("fp8"), std::invalid_argument);
  CHECK_THROWS_AS(parse_gradient_format("e4m3:tile:1x7"), std::invalid_argument);
  CHECK_THROWS_AS(parse_gradient_format("fp32"), std::invalid_argument);
}

TEST_CASE("gradient formats: fp16 flush/subnormal/overflow counts equal an FP64 count at every scale") {
  // 2^-40 .. 2^20: below FP16's 2^-24 at small scales, above 65504 at large ones.
  const std::vector<float> g = log_uniform(20000, -40.0, 20.0, 11);
  for (int s = 0; s <= 24; ++s) {
    const GradientFormatLoss l = gradient_format_loss(g, widen(g), 100, 200, parse_gradient_format("fp16"), s);
    const Expected e = count_by_thresholds(g, s, 0x1p-24, 0x1p-14, 65504.0 + 16.0);
    INFO("log2 scale " << s);
    CHECK(l.nonzero == 20000);
    CHECK(l.flushed == e.flushed);
    CHECK(l.subnormal == e.subnormal);
    CHECK(l.overflowed == e.overflowed);
    CHECK(l.flushed_fraction == static_cast<double>(e.flushed) / 20000.0);
  }
}

TEST_CASE("gradient formats: the e5m2 cast saturates; its counts equal an FP64 count at every scale") {
  const std::vector<float> g = log_uniform(20000, -40.0, 20.0, 12);
  for (int s = 0; s <= 24; ++s) {
    const GradientFormatLoss l = gradient_format_loss(g, widen(g), 20000, 1, parse_gradient_format("e5m2"), s);
    // E5M2: subnormal quantum 2^-16, smallest normal 2^-14, max 57344 with ulp 2^13.
    const Expected e = count_by_thresholds(g, s, 0x1p-16, 0x1p-14, 57344.0 + 4096.0);
    INFO("log2 scale " << s);
    CHECK(l.flushed == e.flushed);
    CHECK(l.subnormal == e.subnormal);
    CHECK(l.overflowed == e.overflowed);
    // Saturation: the error stays finite however many values overflow.
    CHECK(std::isfinite(l.rel_frobenius));
  }
}

TEST_CASE("gradient formats: fp16 error equals an FP64 computation with the compiler's _Float16 rounding") {
  const std::vector<float> g = log_uniform(5000, -30.0, 0.0, 13);
  std::vector<double> r(g.size());  // an FP64 "reference" off the FP32 gradient by ~1e-9 relative
  for (std::size_t i = 0; i < g.size(); ++i) r[i] = static_cast<double>(g[i]) * (1.0 + 1e-9 * std::sin(static_cast<double>(i)));
  for (int s : {0, 8, 16}) {
    double num = 0, den = 0, num32 = 0, den32 = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
      const auto h = static_cast<_Float16>(std::ldexp(g[i], s));  // FP32 -> FP16, round to nearest even
      const double y = std::ldexp(static_cast<double>(h), -s);
      num += (y - r[i]) * (y - r[i]);
      den += r[i] * r[i];
      num32 += (y - g[i]) * (y - g[i]);
      den32 += static_cast<double>(g[i]) * g[i];
    }
    const GradientFormatLoss l = gradient_format_loss(g, r, 50, 100, parse_gradient_format("fp16"), s);
    // Both are sums of 5000 non-negative terms in FP64: relative rounding <= 5000 * 2^-53 ~ 6e-13.
    CHECK(l.rel_frobenius == Approx(std::sqrt(num / den)).epsilon(1e-11));
    CHECK(l.format_rel_frobenius == Approx(std::sqrt(num32 / den32)).epsilon(1e-11));
  }
}

TEST_CASE("gradient formats: an overflow to inf in fp16 makes the error NaN (the step would be skipped)") {
  const std::vector<float> g = {1.0f, 70000.0f};
  const GradientFormatLoss l = gradient_format_loss(g, widen(g), 1, 2, parse_gradient_format("fp16"), 0);
  CHECK(l.overflowed == 1);
  CHECK(l.overflowed_fraction == 0.5);
  CHECK(std::isnan(l.rel_frobenius));
}

TEST_CASE("gradient formats: current scaling cancels the loss scale, bit for bit") {
  // amax = 448 * 2^-20 exactly: the per-tensor scale sf = fl32(amax * 2^s / 448) = 2^(s-20) is a
  // power of two, so v = g 2^s / sf = g 2^20 exactly, whatever s. E4M3 flushes v <= 2^-10
  // (half its smallest subnormal 2^-9), so the expected count is an FP64 loop over g 2^20.
  std::vector<float> g = log_uniform(4096, -45.0, -21.0, 14);
  g[17] = static_cast<float>(448.0 * 0x1p-20);
  std::int64_t expected_flushed = 0;
  for (float x : g) expected_flushed += std::ldexp(std::fabs(static_cast<double>(x)), 20) <= 0x1p-10;
  REQUIRE(expected_flushed > 100);  // the case exercises flushing
  const GradientFormatLoss at0 = gradient_format_loss(g, widen(g), 32, 128, parse_gradient_format("e4m3:tensor"), 0);
  CHECK(at0.flushed == expected_flushed);
  CHECK(at0.overflowed == 0);
  for (const char* f : {"e4m3:tensor", "e5m2:tensor", "e4m3:tile:1x128", "e5m2:tile:1x128"}) {
    const GradientFormatLoss base = gradient_format_loss(g, widen(g), 32, 128, parse_gradient_format(f), 0);
    for (int s = 1; s <= 24; ++s) {
      const GradientFormatLoss l = gradient_format_loss(g, widen(g), 32, 128, parse_gradient_format(f), s);
      INFO(f << " log2 scale " << s);
      CHECK(l.flushed == base.flushed);
      CHECK(l.subnormal == base.subnormal);
      CHECK(l.overflowed == 0);
      CHECK(l.rel_frobenius == base.rel_frobenius);
    }
  }
}

TEST_CASE("gradient formats: a ragged 1x128 tile (200 columns) is scaled by its own amax") {
  // Row r holds 2^-r in every column but one value 2^-r * 2^-12: per tile the small value sits
  // 12 binades under its tile's amax, inside E4M3's range (2^-9 .. 448, ~17.8 binades), so
  // nothing flushes; per tensor row 20 sits 20 binades under the global amax and its small value
  // 32 under: those flush (v <= 2^-10 with v = |g| 448 / amax_tensor).
  const std::int64_t rows = 24, cols = 200;
  std::vector<float> g(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      g[static_cast<std::size_t>(r * cols + c)] = static_cast<float>(std::exp2(-static_cast<double>(r)) * (c == 150 ? 0x1p-12 : 1.0));
  std::int64_t expected_tensor = 0;
  for (float x : g) expected_tensor += static_cast<double>(x) * 448.0 <= 0x1p-10;
  const GradientFormatLoss tile = gradient_format_loss(g, widen(g), rows, cols, parse_gradient_format("e4m3:tile:1x128"), 0);
  const GradientFormatLoss tensor = gradient_format_loss(g, widen(g), rows, cols, parse_gradient_format("e4m3:tensor"), 0);
  CHECK(tile.flushed == 0);
  CHECK(tensor.flushed == expected_tensor);
  CHECK(expected_tensor > 0);
}

TEST_CASE("gradient formats: zeros are not counted, a size mismatch throws") {
  const std::vector<float> g = {0.0f, 0.0f, 1e-30f, 1.0f};
  const GradientFormatLoss l = gradient_format_loss(g, widen(g), 2, 2, parse_gradient_format("fp16"), 0);
  CHECK(l.nonzero == 2);
  CHECK(l.flushed == 1);
  CHECK(l.flushed_fraction == 0.5);
  CHECK_THROWS_AS(gradient_format_loss(g, widen(g), 3, 2, parse_gradient_format("fp16"), 0), std::invalid_argument);
  CHECK_THROWS_AS(gradient_format_loss(g, std::vector<double>(3), 2, 2, parse_gradient_format("fp16"), 0), std::invalid_argument);
}
