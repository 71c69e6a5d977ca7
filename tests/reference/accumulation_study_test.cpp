// The accumulation study as tests (what the Hopper FP8 GEMM's truncated accumulation loses without
// and with promotion; block against per-tensor scaling), with bounds derived from the model.
//
// Model (hopper: F = 13 fraction bits, D = 32 products per instruction, truncation). In one
// instruction every term is truncated to a multiple of the quantum u = 2^(E - F), E the
// largest exponent; with positive terms each truncation loses [0, u), on average u/2 for
// terms much larger than u with uniform low bits, and the normalization of the sum loses
// another [0, u). Once the partial c dominates, 2^E lies in (c/2, c], so instruction j loses
// on average about (D + 1)/2 * 2^-F * c_j / s_j with s_j in [1, 2). Positive inputs make
// these losses add up coherently: with c_j ~ j c_J / J over J instructions,
//   relative accumulation error ~ (D + 1)/2 * 2^-F * (J / 2) / s,   s in [1, 2).
// K = 4096, no promotion: J = 128 -> between 0.064 (s = 2) and 0.129 (s = 1): "several percent".
// N_C = 128 (J = 4 per partial, partials summed in FP32 with (K/N_C) 2^-24 error):
//   (D + 1)/2 * 2^-F * (1 + 2 + 3 + 4)/4 / s  ->  at most 0.005,
// an upper estimate: early in a partial the quantum is close to the products' own last bit
// (E4M3 products carry 8 significant bits), so remainders are mostly 0, not uniform.
// Promotion every 128 therefore cuts the error by at least 0.064 / 0.005 = 12.9 (about 25
// to first order, more in practice). The test asserts > 10.
#include <catch2/catch.hpp>
#include <random>

#include "harness/metrics/gemm_errors.hpp"
#include "kernels/cpu/gemm_fp8_nt.hpp"
#include "kernels/cpu/quantize.hpp"

using namespace fp8lab;

namespace {

std::vector<float> uniform_positive(std::int64_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(0.0f, 1.0f);
  std::vector<float> v(static_cast<std::size_t>(n));
  for (float& x : v) x = u(rng);
  return v;
}

GemmErrors run(const std::vector<float>& a, const std::vector<float>& b, std::int64_t m, std::int64_t n, std::int64_t k,
               const char* ga, const char* gb, const char* promotion) {
  const QuantizedTensor qa = cpu::quantize(a, m, k, {Fp8Format::e4m3, Granularity::parse(ga), ScaleRule::fp32});
  const QuantizedTensor qb = cpu::quantize(b, n, k, {Fp8Format::e4m3, Granularity::parse(gb), ScaleRule::fp32});
  const std::vector<float> out =
      cpu::gemm_nt(qa, qb, {AccumulationModel::hopper(), PromotionInterval::parse(promotion), OutputType::fp32});
  return gemm_errors(a, b, qa, qb, out, {}, {});
}

}  // namespace

TEST_CASE("accumulation study: K = 4096 positive inputs lose several percent without promotion, >10x less with N_C = 128") {
  constexpr std::int64_t m = 16, n = 16, k = 4096;
  const std::vector<float> a = uniform_positive(m * k, 1), b = uniform_positive(n * k, 2);
  const double never = run(a, b, m, n, k, "tensor", "tensor", "never").accumulation.metrics.rel_frobenius;
  const double every128 = run(a, b, m, n, k, "tensor", "tensor", "128").accumulation.metrics.rel_frobenius;
  INFO("accumulation error: never " << never << " (derived 0.064..0.129), N_C=128 " << every128
                                    << " (derived at most 0.005), ratio " << never / every128);
  CHECK(never > 0.064 / 2);    // half the derived lower end, for the first-order approximations
  CHECK(never < 0.129 * 1.5);
  CHECK(every128 < 0.005 * 1.5);
  CHECK(never / every128 > 10.0);
}

TEST_CASE("accumulation study: 1x128 / 128x128 scaling beats per-tensor on outlier activations (N_C = 128)") {
  // A: activations with 8 outlier channels at 100x; B: Gaussian weights. Per-tensor scaling
  // pushes the ordinary channels of A down by the outliers' 100x, into E4M3's coarse and
  // subnormal range; 1x128 tiles keep most tiles free of outliers. The margin comes from the
  // data: the difference of the total errors must exceed twice the sum of both runs'
  // accumulation errors, so it is not explained by accumulation noise.
  constexpr std::int64_t m = 64, n = 64, k = 1024;
  std::mt19937_64 rng(9);
  std::normal_distribution<float> normal;
  std::vector<float> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(n * k));
  for (std::int64_t i = 0; i < m * k; ++i) a[static_cast<std::size_t>(i)] = normal(rng) * ((i % k) % 128 == 5 && (i % k) < 8 * 128 ? 100.0f : 1.0f);
  for (float& x : b) x = normal(rng);
  const GemmErrors fine = run(a, b, m, n, k, "tile:1x128", "block:128x128", "128");
  const GemmErrors coarse = run(a, b, m, n, k, "tensor", "tensor", "128");
  const double margin = 2.0 * (fine.accumulation.metrics.rel_frobenius + coarse.accumulation.metrics.rel_frobenius);
  INFO("total error: fine " << fine.total.metrics.rel_frobenius << ", per-tensor " << coarse.total.metrics.rel_frobenius
                            << ", margin " << margin);
  CHECK(coarse.total.metrics.rel_frobenius - fine.total.metrics.rel_frobenius > margin);
}

TEST_CASE("sampled GEMM errors: the 95% interval covers the full-output value") {
  // Deterministic data and sample: checks the estimator and interval are computed on the
  // right quantities (a full coverage study would need many seeds).
  constexpr std::int64_t m = 256, n = 64, k = 512;
  std::mt19937_64 rng(4);
  std::normal_distribution<float> normal;
  std::vector<float> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(n * k));
  for (float& x : a) x = normal(rng);
  for (float& x : b) x = normal(rng);
  const QuantizedTensor qa = cpu::quantize(a, m, k, {Fp8Format::e4m3, Granularity::tile(128), ScaleRule::fp32});
  const QuantizedTensor qb = cpu::quantize(b, n, k, {Fp8Format::e4m3, Granularity::block(128), ScaleRule::fp32});
  const GemmConfig config{AccumulationModel::hopper(), PromotionInterval::parse("128"), OutputType::fp32};
  const GemmErrors full = gemm_errors(a, b, qa, qb, cpu::gemm_nt(qa, qb, config), {}, {});
  std::vector<std::int64_t> rows;
  for (std::int64_t r = 3; r < m; r += 4) rows.push_back(r);  // 64 of 256 rows
  const GemmErrors sampled = gemm_errors(a, b, qa, qb, cpu::gemm_nt(qa, qb, config, {0, false, rows, {}}), rows, {});
  REQUIRE(sampled.total.sampled);
  REQUIRE_FALSE(full.total.sampled);
  for (const auto& [s, f] : {std::pair{&sampled.total, &full.total}, {&sampled.accumulation, &full.accumulation}}) {
    INFO("full " << f->metrics.rel_frobenius << " interval [" << s->rel_frobenius.low << ", " << s->rel_frobenius.high << "]");
    CHECK(s->rel_frobenius.low <= f->metrics.rel_frobenius);
    CHECK(f->metrics.rel_frobenius <= s->rel_frobenius.high);
    CHECK(s->rel_frobenius.high - s->rel_frobenius.low < 0.5 * f->metrics.rel_frobenius);
  }
}
