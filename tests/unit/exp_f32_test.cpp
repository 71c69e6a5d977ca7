// exp_f32 (kernels/train/exp_f32.hpp): within 1 ulp of exp on normal results (Cephes' expf: range
// reduction exact to 2^-24 relative, a degree-5 minimax polynomial whose error is below 2^-24
// relative, and about eight roundings of which the last dominates; measured worst 0.98 ulp over
// every 7th float in [-110, 90], and checked here on every 4099th), exact at the ends of the range (0, inf, NaN), and the same bits
// from the vectorized loop (exp_f32_affine, compiled for whatever SIMD the build has) as from
// the scalar call.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "kernels/train/exp_f32.hpp"

using fp8lab::train::exp_f32;
using fp8lab::train::exp_f32_affine;

namespace {

// |got - exp(x)| in units of the spacing of FP32 numbers at exp(x) (the subnormal spacing below
// FLT_MIN).
double ulps(float got, double want) {
  const auto w = static_cast<float>(want);
  const double spacing = std::fabs(want) < std::numeric_limits<float>::min()
                             ? std::numeric_limits<float>::denorm_min()
                             : static_cast<double>(std::nextafter(w, std::numeric_limits<float>::infinity()) - w);
  return std::fabs(static_cast<double>(got) - want) / spacing;
}

}  // namespace

TEST_CASE("exp_f32: within 1 ulp of exp over the whole finite range") {
  double worst = 0;
  float at = 0;
  // Every 4099th bit pattern between -104 and 88.72 (about 5e5 values, every binade covered).
  for (std::uint32_t bits = 0; bits < 0xFFFFFFFFu - 4099; bits += 4099) {
    float x;
    std::memcpy(&x, &bits, sizeof x);
    if (!(x > -103.9f && x < 88.72f)) continue;
    const double e = ulps(exp_f32(x), std::exp(static_cast<double>(x)));
    if (e > worst) worst = e, at = x;
  }
  INFO("worst at x = " << at);
  CHECK(worst <= 1.0);
  CHECK(exp_f32(0.0f) == 1.0f);
  // The ends of the range. 88.7228394f exceeds ln(FLT_MAX) by 3e-7, so its exp lies beyond
  // FLT_MAX by more than half FLT_MAX's spacing (2^-24 relative): inf, correctly; the float below
  // it has a finite exp, within 1 ulp.
  const float top = 88.7228394f, bottom = -103.972084f;
  CHECK(std::isinf(exp_f32(top)));
  const float below = std::nextafter(top, 0.0f);
  CHECK(ulps(exp_f32(below), std::exp(static_cast<double>(below))) <= 1.0);
  CHECK(exp_f32(-103.0f) > 0.0f);  // a subnormal result
  CHECK(exp_f32(std::nextafter(bottom, -200.0f)) == 0.0f);
  CHECK(exp_f32(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(exp_f32(-200.0f) == 0.0f);
  CHECK(std::isinf(exp_f32(89.0f)));
  CHECK(std::isinf(exp_f32(std::numeric_limits<float>::infinity())));
  CHECK(std::isnan(exp_f32(std::numeric_limits<float>::quiet_NaN())));
  CHECK(ulps(exp_f32(88.7f), std::exp(static_cast<double>(88.7f))) <= 1.0);  // near FLT_MAX: finite, no overflow
}

TEST_CASE("exp_f32: the vectorized loop gives the scalar call's bits") {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> wide(-120.0f, 95.0f);
  std::vector<float> x(4099);
  for (float& v : x) v = wide(rng);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  x[6] = -std::numeric_limits<float>::infinity();
  x[7] = -100.0f;  // a subnormal result
  for (const auto& [a, b] : {std::pair{1.0f, 0.0f}, {0.353553385f, 2.5f}}) {
    std::vector<float> vectorized = x;
    exp_f32_affine(vectorized.data(), static_cast<std::int64_t>(vectorized.size()), a, b);
    for (std::size_t u = 0; u < x.size(); ++u) {
      const float scalar = exp_f32(x[u] * a - b);
      CAPTURE(u, x[u]);
      CHECK(std::memcmp(&scalar, &vectorized[u], sizeof scalar) == 0);
    }
  }
}
