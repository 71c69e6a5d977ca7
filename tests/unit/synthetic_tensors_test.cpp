// Synthetic operands: reproducible from the seed, the stated distribution, outliers where said.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>

#include "data/synthetic_tensors.hpp"

using namespace fp8lab;

TEST_CASE("synthesize: same seed same tensor, other seed another tensor") {
  SyntheticSpec spec{64, 96, "gaussian", 0, 1.0, 7};
  const std::vector<float> a = synthesize(spec), b = synthesize(spec);
  CHECK(a == b);
  spec.seed = 8;
  CHECK(synthesize(spec) != a);
}

TEST_CASE("synthesize: gaussian moments within sampling error") {
  // n = 2^16 standard normals: the sample mean has standard error 1/sqrt(n) = 0.0039 and the
  // sample variance 2/sqrt(n) ~ 0.0078 (var of z^2 is 2); bounds are 5 standard errors.
  const SyntheticSpec spec{256, 256, "gaussian", 0, 1.0, 11};
  const std::vector<float> x = synthesize(spec);
  double sum = 0, sum2 = 0;
  for (float v : x) {
    sum += v;
    sum2 += static_cast<double>(v) * v;
  }
  const double n = static_cast<double>(x.size());
  CHECK(std::fabs(sum / n) < 5 * 0.0039);
  CHECK(std::fabs(sum2 / n - 1.0) < 5 * 0.0078);
}

TEST_CASE("synthesize: outlier channels are exactly the requested number of columns") {
  // Column RMS of a normal column over 512 rows is 1 +- 0.03; x100 columns stand far apart.
  const SyntheticSpec spec{512, 200, "gaussian", 5, 100.0, 3};
  const std::vector<float> x = synthesize(spec);
  int big = 0;
  for (std::int64_t c = 0; c < spec.cols; ++c) {
    double s2 = 0;
    for (std::int64_t r = 0; r < spec.rows; ++r) s2 += std::pow(x[static_cast<std::size_t>(r * spec.cols + c)], 2);
    if (std::sqrt(s2 / spec.rows) > 10.0) ++big;
  }
  CHECK(big == 5);
}

TEST_CASE("synthesize: student-t has heavier tails than gaussian") {
  // P(|z| > 5) is 5.7e-7 for a normal and 0.0154 for Student-t with 3 degrees of freedom;
  // over 65536 draws that is ~0.04 against ~1000 expected exceedances (Poisson sd ~32).
  const auto exceed = [](const std::string& distribution) {
    const std::vector<float> x = synthesize({256, 256, distribution, 0, 1.0, 5});
    return std::count_if(x.begin(), x.end(), [](float v) { return std::fabs(v) > 5.0f; });
  };
  CHECK(exceed("gaussian") <= 2);
  CHECK(exceed("student-t:3") > 300);
}

TEST_CASE("synthesize: bad specs name the field") {
  CHECK_THROWS_WITH(synthesize({0, 4, "gaussian", 0, 1.0, 0}), Catch::Contains("rows and cols"));
  CHECK_THROWS_WITH(synthesize({4, 4, "gaussian", 5, 1.0, 0}), Catch::Contains("outlier_channels"));
  CHECK_THROWS_WITH(synthesize({4, 4, "gaussian", 1, -1.0, 0}), Catch::Contains("outlier_scale"));
  CHECK_THROWS_WITH(synthesize({4, 4, "cauchy", 0, 1.0, 0}), Catch::Contains("distribution 'cauchy'"));
}
