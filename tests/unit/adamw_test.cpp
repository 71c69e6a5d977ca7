// AdamW (harness/train/adamw.hpp) against the FP64 reference written from the algorithm
// (reference/adamw_ref.hpp): one step from the same FP32 state, within a derived bound; and
// BF16 moments against FP32 moments, exactly.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "harness/train/adamw.hpp"
#include "kernels/formats/float_formats.hpp"
#include "reference/adamw_ref.hpp"
#include "tests/support/adamw_moment_cases.hpp"

using namespace fp8lab;
using namespace fp8lab::train;
using test::Case;
using test::make_case;

namespace {

constexpr double u = 0x1p-24;  // unit roundoff of FP32
double gamma(int k) { return k * u / (1 - k * u); }

}  // namespace

TEST_CASE("adamw: one FP32 step is within the derived bound of the FP64 reference, per element") {
  const std::size_t n = 4096;
  for (const std::int64_t t : {1, 2, 10, 1000}) {
    for (const double wd : {0.0, 0.1}) {
      AdamWConfig config;
      config.weight_decay = wd;
      const double lr = 1e-3;
      const Case c = make_case(static_cast<std::uint64_t>(t) * 7 + (wd > 0), n);
      AdamWMoments moments(n, MomentFormat::fp32);
      for (std::size_t i = 0; i < n; ++i) moments.set(i, c.m[i], c.v[i]);
      std::vector<float> p = c.p;
      adamw_update(p, c.g, moments, config, t, lr, wd);
      ref::AdamWRefState r{{c.p.begin(), c.p.end()}, {c.m.begin(), c.m.end()}, {c.v.begin(), c.v.end()}};
      ref::adamw_ref_step(r, {c.g.begin(), c.g.end()}, lr, config.beta1, config.beta2, config.eps, wd, t);
      // Bound (running error analysis, every FP32 operation x(1 + d), |d| <= u, gamma_k = ku/(1-ku);
      // the FP64 reference's own error, ~2^-53 relative, is far below these terms):
      //   p * fl32(1 - lr wd): two roundings                        -> gamma_2 |p|  (+1 for slack: gamma_3)
      //   m = m0 + fl32(1 - b1)(g - m0): four roundings, no sign assumption -> gamma_4 M,
      //       M = |m0| + (1 - b1)|g - m0|
      //   v: four roundings of non-negative terms -> relative gamma_4; sqrt halves it, +1 rounding,
      //       / fl32(sqrt(bc2)) +2, + fl32(eps) +2 -> denom relative gamma_7 at most
      //   m / denom: m's absolute error / denom, plus |m| (gamma_7 + u) / denom
      //   * fl32(-lr / bc1) +2 roundings, then the final add: u |p_new|
      // so |p32 - p64| <= gamma_3 |p| + |s| (gamma_6 M + gamma_10 |m|) / denom + gamma_1 |p_new|.
      const double bc1 = 1 - std::pow(config.beta1, static_cast<double>(t));
      const double bc2 = 1 - std::pow(config.beta2, static_cast<double>(t));
      const double step = lr / bc1;
      double worst = 0;
      std::size_t worst_at = 0;
      for (std::size_t i = 0; i < n; ++i) {
        const double M = std::fabs(c.m[i]) + (1 - config.beta1) * std::fabs(static_cast<double>(c.g[i]) - c.m[i]);
        const double denom = std::sqrt(r.v[i] / bc2) + config.eps;
        const double bound = gamma(3) * std::fabs(c.p[i]) + step * (gamma(6) * M + gamma(10) * std::fabs(r.m[i])) / denom +
                             gamma(1) * std::fabs(r.theta[i]);
        const double used = std::fabs(p[i] - r.theta[i]) / bound;
        if (used > worst) worst = used, worst_at = i;
        // The moments as stored: m within gamma_4 M, v within gamma_4 |v|.
        REQUIRE(std::fabs(moments.m(i) - r.m[i]) <= gamma(4) * M);
        REQUIRE(std::fabs(moments.v(i) - r.v[i]) <= gamma(4) * r.v[i]);
      }
      INFO("t=" << t << " wd=" << wd << ": worst element " << worst_at << " used " << worst << " of its bound (p32 "
                << p[worst_at] << ", p64 " << r.theta[worst_at] << ")");
      CHECK(worst <= 1.0);
      CHECK(worst > 0.0);  // the FP32 path did round somewhere (it is not secretly FP64)
    }
  }
}

TEST_CASE("adamw: BF16 moments give the FP32-moment update and store its moments rounded to BF16") {
  const std::size_t n = 1024;
  Case c = make_case(99, n);
  AdamWConfig config;
  config.weight_decay = 0.1;
  AdamWMoments m32(n, MomentFormat::fp32), m16(n, MomentFormat::bf16);
  for (std::size_t i = 0; i < n; ++i) {  // a start both formats hold exactly
    const float m = decode<BF16>(encode<BF16>(c.m[i])), v = decode<BF16>(encode<BF16>(c.v[i]));
    m32.set(i, m, v);
    m16.set(i, m, v);
  }
  std::vector<float> p32 = c.p, p16 = c.p;
  adamw_update(p32, c.g, m32, config, 3, 1e-3, 0.1);
  adamw_update(p16, c.g, m16, config, 3, 1e-3, 0.1);
  CHECK(p16 == p32);
  std::size_t rounded = 0;
  for (std::size_t i = 0; i < n; ++i) {
    REQUIRE(m16.m(i) == decode<BF16>(encode<BF16>(m32.m(i), Saturation::nosat)));
    REQUIRE(m16.v(i) == decode<BF16>(encode<BF16>(m32.v(i), Saturation::nosat)));
    rounded += m16.m(i) != m32.m(i);
  }
  CHECK(rounded > n / 2);  // BF16 storage really rounds
  CHECK(m16.bytes() == 2 * n * 2);
  CHECK(m32.bytes() == 2 * n * 4);
}

TEST_CASE("adamw: weight decay is decoupled and applied before the update, scaled by lr") {
  // With a zero gradient and zero moments the update term is 0 / (0 + eps) = 0, so only the
  // decay acts: p <- p * fl32(1 - lr wd).
  AdamWConfig config;
  config.weight_decay = 0.5;
  AdamWMoments moments(3, MomentFormat::fp32);
  std::vector<float> p = {1.0f, -2.0f, 0.25f};
  adamw_update(p, std::vector<float>(3, 0.0f), moments, config, 1, 0.1, 0.5);
  CHECK(p == std::vector<float>{0.95f * 1.0f, 0.95f * -2.0f, 0.95f * 0.25f});
}

TEST_CASE("adamw: bad settings are refused naming the field") {
  AdamWConfig c;
  c.beta1 = 1.0;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("beta1"));
  c = {};
  c.eps = 0;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("eps"));
  c = {};
  c.weight_decay = -1;
  CHECK_THROWS_WITH(c.validate(), Catch::Contains("weight_decay"));
  CHECK_THROWS_WITH(parse_moment_format("fp8"), Catch::Contains("fp8"));
}
