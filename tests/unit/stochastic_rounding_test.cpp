// Stochastic rounding (kernels/formats/stochastic_rounding.hpp): what it must keep (representable
// values, nearest's bits, reproducibility) and, statistically, that it is unbiased. The bit-exact
// comparison with the FP64 reference is tests/reference/stochastic_rounding_ref_test.cpp.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/quantize.hpp"

using namespace fp8lab;

namespace {

// Every finite value of F, both signs (its codes decoded: exact by the codec's contract).
template <class F>
std::vector<float> representable_values_of() {
  std::vector<float> values;
  for (std::uint32_t code = 0; code <= FormatLayout<F>::sign_bit + F::max_finite_code; ++code) {
    const float v = decode<F>(code);
    if (std::isfinite(v)) values.push_back(v);
  }
  return values;
}

template <class F>
void check_representable_values_never_move() {
  std::mt19937 rng(3);
  std::vector<std::uint32_t> draws = {0u, 1u, 0x80000000u, 0xFFFFFFFFu};
  for (int i = 0; i < 60; ++i) draws.push_back(static_cast<std::uint32_t>(rng()));
  std::size_t moved = 0;
  for (const float v : representable_values_of<F>())
    for (const std::uint32_t u : draws)
      if (encode_stochastic<F>(v, u) != encode<F>(v) && ++moved <= 3)
        UNSCOPED_INFO(F::name << " " << v << " with draw " << u << " moved to code " << encode_stochastic<F>(v, u));
  CHECK(moved == 0);
}

// The unbiasedness check for one format: for x strictly between neighbours lo < hi, the
// fraction of N roundings that give hi must be p = (x - lo) / (hi - lo).
//
// Bound (Hoeffding): the roundings are N independent draws X_k in {0, 1} (X_k = 1 when the code
// is hi), mean p' = F / 2^32 with F = floor(2^32 p); so P(|mean - p'| >= t) <= 2 exp(-2 N t^2).
// Setting that to delta gives t = sqrt(ln(2 / delta) / (2 N)); and |p' - p| < 2^-32 (the draw's
// 32-bit resolution, stochastic_rounding.hpp). In the scaled domain that is
// |mean of the rounded values - x| <= (hi - lo) (sqrt(ln(2 / delta) / (2 N)) + 2^-32).
// With delta = 1e-9 per point and at most a few thousand points here, the chance that a correct
// implementation fails the whole test is below 1e-5. Independence is the modelling assumption:
// the draws of consecutive indices are SplitMix64 outputs (it passes BigCrush), not true coins.
// N = 20000 makes t = 0.0232: a rounding biased by 1/32 of a spacing fails (checked by hand).
template <class F>
void check_unbiased(std::uint64_t seed) {
  constexpr int kN = 20000;
  constexpr double kDelta = 1e-9;
  const double bound = std::sqrt(std::log(2.0 / kDelta) / (2.0 * kN)) + 0x1p-32;
  std::vector<float> values = representable_values_of<F>();
  values.erase(std::remove_if(values.begin(), values.end(), [](float v) { return v < 0.0f || std::signbit(v); }),
               values.end());
  std::sort(values.begin(), values.end());
  std::mt19937 rng(static_cast<std::uint32_t>(seed));
  std::uniform_real_distribution<double> position(0.0, 1.0);
  double worst = 0.0;  // the largest |mean - p| / bound seen: the budget used
  std::size_t points = 0, failures = 0;
  std::uint64_t first_index = 0;
  for (std::size_t i = 0; i + 1 < values.size(); ++i) {
    const float lo = values[i], hi = values[i + 1];
    // A quarter, the midpoint (nearest's tie), and two random points; both signs.
    for (const double at : {0.25, 0.5, position(rng), position(rng)})
      for (const float sign : {1.0f, -1.0f}) {
        const float x = sign * static_cast<float>(lo + at * (hi - lo));
        if (std::fabs(x) <= lo || std::fabs(x) >= hi) continue;  // rounded onto a neighbour in FP32
        const double p = (static_cast<double>(std::fabs(x)) - lo) / (static_cast<double>(hi) - lo);
        int ups = 0;
        for (int k = 0; k < kN; ++k) {
          const float r = decode<F>(encode_stochastic<F>(x, stochastic_draw(seed, first_index + k)));
          ups += std::fabs(r) == hi;
        }
        first_index += kN;
        ++points;
        const double deviation = std::fabs(static_cast<double>(ups) / kN - p);
        worst = std::max(worst, deviation / bound);
        if (deviation > bound && ++failures <= 3)
          UNSCOPED_INFO(F::name << " x = " << x << " between " << lo << " and " << hi << ": mean of " << kN
                                << " roundings is off by " << deviation << " spacings, bound " << bound);
      }
  }
  INFO(F::name << ": " << points << " points, " << kN << " roundings each; worst deviation " << worst
               << " of the bound (" << bound << " spacings)");
  CHECK(points > 0);
  CHECK(failures == 0);
}

}  // namespace

TEST_CASE("stochastic rounding never moves a representable value (every code of every element format)") {
  check_representable_values_never_move<E4M3>();
  check_representable_values_never_move<E5M2>();
  check_representable_values_never_move<E2M1>();
  check_representable_values_never_move<E3M2>();
  check_representable_values_never_move<E2M3>();
}

TEST_CASE("stochastic rounding is unbiased between every pair of neighbours: E4M3, E5M2, E2M1 (Hoeffding bound)") {
  check_unbiased<E4M3>(0x1234);
  check_unbiased<E5M2>(0xABCD);
  check_unbiased<E2M1>(0x5EED);
}

TEST_CASE("stochastic rounding saturates as nearest does and keeps NaN, inf and signed zero as the codec does") {
  for (const std::uint32_t u : {0u, 0xFFFFFFFFu}) {
    CHECK(encode_stochastic<E4M3>(447.0f, u) == (u == 0 ? 0x7Eu : 0x7Du));  // 447: between 416 and 448
    CHECK(encode_stochastic<E4M3>(1e30f, u) == 0x7E);
    CHECK(encode_stochastic<E4M3>(-INFINITY, u) == 0xFE);
    CHECK(encode_stochastic<E5M2>(INFINITY, u) == 0x7B);  // satfinite: 57344, as nearest's default
    CHECK(encode_stochastic<E2M1>(-7.0f, u) == 0xF);
    CHECK(encode_stochastic<E4M3>(NAN, u) == 0x7F);
    CHECK(encode_stochastic<E2M1>(NAN, u) == encode<E2M1>(NAN));
    CHECK(encode_stochastic<E4M3>(-0.0f, u) == 0x80);
    CHECK(encode_stochastic<E4M3>(-1e-30f, u) == 0x80);  // rounds to -0: the fraction's 32 bits are 0
  }
}

TEST_CASE("quantize: nearest is the default and ignores the seed; a seed reproduces stochastic codes exactly") {
  const std::int64_t rows = 24, cols = 80;
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (float& v : x) v = normal(rng);
  const QuantizeConfig nearest{Fp8Format::e4m3, Granularity::tile(16), ScaleRule::fp32};
  CHECK(nearest.rounding.mode == RoundingMode::nearest);
  QuantizeConfig nearest_seeded = nearest;
  nearest_seeded.rounding.seed = 99;
  CHECK(cpu::quantize(x, rows, cols, nearest).codes == cpu::quantize(x, rows, cols, nearest_seeded).codes);

  QuantizeConfig sr = nearest;
  sr.rounding = {RoundingMode::stochastic, 42};
  const QuantizedTensor a = cpu::quantize(x, rows, cols, sr), b = cpu::quantize(x, rows, cols, sr);
  CHECK(a.codes == b.codes);
  CHECK(a.scales == cpu::quantize(x, rows, cols, nearest).scales);  // rounding never changes a scale
  sr.rounding.seed = 43;
  CHECK(cpu::quantize(x, rows, cols, sr).codes != a.codes);
  // An element's draw depends on its index only, not on which tiles were quantized before it:
  // row 0 alone, as a 1 x cols tensor, has the same indices 0 .. cols - 1 and the same scale.
  sr.rounding.seed = 42;
  sr.granularity = Granularity::row();
  const QuantizedTensor by_row = cpu::quantize(x, rows, cols, sr);
  const std::vector<float> one_row(x.begin(), x.begin() + cols);
  CHECK(std::equal(by_row.codes.begin(), by_row.codes.begin() + cols, cpu::quantize(one_row, 1, cols, sr).codes.begin()));
}

TEST_CASE("quantize: stochastic rounding leaves a tensor of representable values unchanged (mx, scale 1)") {
  // Under `mx` a block whose amax is the format's maximum gets the scale 2^0, so each element
  // reaches the codec as itself.
  const auto check = [](ElementFormat format, std::vector<float> values) {
    INFO(format.name());
    values.push_back(format_max(format));
    const auto cols = static_cast<std::int64_t>(values.size());
    const QuantizeConfig nearest{format, Granularity::row(), ScaleRule::mx};
    QuantizeConfig sr = nearest;
    sr.rounding = {RoundingMode::stochastic, 7};
    CHECK(cpu::quantize(values, 1, cols, sr).codes == cpu::quantize(values, 1, cols, nearest).codes);
    CHECK(cpu::dequantize(cpu::quantize(values, 1, cols, sr)) == values);
  };
  check(Fp8Format::e4m3, representable_values_of<E4M3>());
  check(Fp8Format::e5m2, representable_values_of<E5M2>());
  check(ElementFormat::Kind::e2m1, representable_values_of<E2M1>());
}
