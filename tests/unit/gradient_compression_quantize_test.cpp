// Gradient compression's quantizer (harness/train/gradient_compression.hpp) against the FP64
// reference (reference/gradient_compression_ref). Exact tier: inputs whose scales and x / scale
// are exact, module and reference bit for bit. Statistical tier: general inputs within the budget
// one FP32 rounding of x / scale allows; stochastic rounding unbiased within a derived bound, and
// reproducible from its seed, step, worker and tensor.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "harness/train/gradient_compression.hpp"
#include "reference/gradient_compression_ref.hpp"
#include "tests/support/gradient_compression_cases.hpp"

using namespace fp8lab;
using namespace fp8lab::train;

using test::normal_tensor;
using test::quantize_config;
using test::same_bits;
using test::widen;

namespace {

std::int64_t levels_of(int bits) { return (std::int64_t{1} << (bits - 1)) - 1; }

// The exact tier's input: n integers in groups of `group` elements; group g has amax = L 2^k_g
// (k_g in 0..3, one element at a random position and sign), the rest uniform in [-L 2^k, L 2^k],
// so scale = 2^k_g and x / scale = integer / 2^k_g are exact in FP32 (|x| <= 32767 * 8 < 2^24), and
// with k >= 1 the halves that nearest's tie rule decides occur. Group `zero_group` is all zero.
std::vector<float> exact_tier_input(int bits, std::size_t n, std::size_t group, std::int64_t zero_group,
                                    std::mt19937_64& rng, std::vector<double>& expected_scales) {
  const std::int64_t levels = levels_of(bits);
  std::vector<float> x(n, 0.0f);
  expected_scales.clear();
  for (std::size_t begin = 0, g = 0; begin < n; begin += group, ++g) {
    const std::size_t end = std::min(n, begin + group);
    if (static_cast<std::int64_t>(g) == zero_group) {
      expected_scales.push_back(0.0);
      continue;
    }
    const int k = static_cast<int>(rng() % 4);
    const std::int64_t amax = levels << k;
    std::uniform_int_distribution<std::int64_t> value(-amax, amax);
    for (std::size_t i = begin; i < end; ++i) x[i] = static_cast<float>(value(rng));
    const std::size_t at = begin + rng() % (end - begin);
    x[at] = static_cast<float>(rng() % 2 ? amax : -amax);
    expected_scales.push_back(std::ldexp(1.0, k));
  }
  return x;
}

// One exact-tier configuration: codes, scales and the decompressed values, bit for bit.
void check_exact_tier(int bits, std::int64_t block, RoundingMode rounding, std::mt19937_64& rng) {
  const std::size_t n = 300;
  const std::size_t group = block == 0 ? n : static_cast<std::size_t>(block);
  std::vector<double> expected_scales;
  const std::vector<float> x = exact_tier_input(bits, n, group, block == 0 ? -1 : 1, rng, expected_scales);
  const CompressionConfig config = quantize_config(bits, block, rounding, 0xC0FFEE);
  const std::int64_t step = 11, worker = 3;
  const std::size_t tensor = 5;
  const std::uint64_t stream = compression_stream(config.seed, step, worker, tensor);
  const QuantizedGroups module = quantize_groups(x, bits, block, rounding, stream);
  const ref::SymmetricQuantizedRef reference = ref::quantize_symmetric_ref(
      widen(x), bits, block, rounding == RoundingMode::stochastic, {config.seed, step, worker, tensor});
  std::vector<float> y(n);
  compress_decompress(config, x, stream, y);

  INFO("bits " << bits << ", block " << block << ", " << compression_rounding_name(rounding));
  REQUIRE(module.scales.size() == reference.scales.size());
  REQUIRE(module.scales.size() == expected_scales.size());
  for (std::size_t g = 0; g < module.scales.size(); ++g) {
    CHECK(static_cast<double>(module.scales[g]) == reference.scales[g]);
    CHECK(static_cast<double>(module.scales[g]) == expected_scales[g]);
  }
  std::size_t mismatches = 0;
  for (std::size_t i = 0; i < n; ++i) {
    // q = 0 must decompress to +0 (a -0 would still compare equal to the reference's 0).
    const bool same = module.q[i] == reference.q[i] && static_cast<double>(y[i]) == reference.values[i] &&
                      (y[i] != 0.0f || !std::signbit(y[i]));
    if (!same && ++mismatches <= 3)
      UNSCOPED_INFO("element " << i << ": x = " << x[i] << ", q " << module.q[i] << " vs reference " << reference.q[i]
                               << ", value " << y[i] << " vs " << reference.values[i]);
  }
  CHECK(mismatches == 0);
}

// The reference's draw of element i as a fraction of 2^32, in [0, 1).
double draw_fraction(const ref::CompressionDrawRef& at, std::size_t i) { return ref::compression_draw_ref(at, i) * 0x1p-32; }

// Distance from v to the nearest integer.
double integer_distance(double v) { return std::fabs(v - std::nearbyint(v)); }

// General inputs: the module against the reference within the budget of its one extra rounding.
//
// Budget. The scale is the same FP32 number in both (fl32(amax / L): FP32 division, or FP64
// division then a rounding to FP32, which is the same, since double rounding of a quotient is
// innocuous when the wide format has at least 2p + 2 = 50 bits, Figueroa 1995). The module rounds
// t = x / scale to FP32 before rounding it to an integer, the reference does not (its FP64 quotient
// is within 2^-53 |t| of the exact one); so |t_module - t_reference| <= (2^-24 + 2^-52) |t| =: w.
// Nearest: q differs only where a half-integer lies within w of t_reference, and then by one.
// Stochastic: q = lo + [u < F] is floor(|t| + 1 - u / 2^32) up to F's truncation to 32 bits
// (2^-32 in each), so q differs only where |t| + 1 - u / 2^32 lies within w + 2^-32 of an integer
// (the clamp at L included: |t| just under L rounds to L or L - 1, the module's >= L to L).
// Every difference must be one step inside that window; the test prints how much of it was used.
void check_general_tier(int bits, std::int64_t block, RoundingMode rounding, std::uint64_t seed) {
  const std::size_t n = 2000;
  const std::size_t group = block == 0 ? n : static_cast<std::size_t>(block);
  const std::int64_t levels = levels_of(bits);
  std::mt19937_64 rng(seed);
  std::vector<float> x = normal_tensor(n, seed + 1);
  std::uniform_int_distribution<std::int64_t> level(0, levels - 1);
  for (std::size_t begin = 0; begin < n; begin += group) {
    const std::size_t end = std::min(n, begin + group);
    const float magnitude = std::ldexp(1.0f, static_cast<int>(rng() % 41) - 20);  // groups 2^-20 .. 2^20
    float amax = 0.0f;
    for (std::size_t i = begin; i < end; ++i) amax = std::max(amax, std::fabs(x[i] *= magnitude));
    // Every third element near a tie of nearest (m + 1/2) and every third near an integer (where
    // stochastic's floor turns), both from the group's own scale, and below amax; moved by -2..2
    // ulps, so that many lie just outside the window, where the module must agree exactly (a
    // module computing x * fl32(1 / scale), two roundings, does not).
    const float scale = amax / static_cast<float>(levels);
    for (std::size_t i = begin; i < end; ++i) {
      if (std::fabs(x[i]) == amax || i % 3 == 0) continue;
      const double m = static_cast<double>(level(rng)) + (i % 3 == 1 ? 0.5 : 0.0);
      x[i] = static_cast<float>((rng() % 2 ? m : -m) * scale);
      for (int ulps = static_cast<int>(rng() % 5) - 2; ulps != 0; ulps += ulps > 0 ? -1 : 1)
        if (std::fabs(x[i]) < amax) x[i] = std::nextafter(x[i], ulps > 0 ? amax : -amax);
    }
  }
  const ref::CompressionDrawRef at{seed, 4, 2, 1};
  const std::uint64_t stream = compression_stream(at.seed, at.step, at.worker, at.tensor);
  const QuantizedGroups module = quantize_groups(x, bits, block, rounding, stream);
  const bool stochastic = rounding == RoundingMode::stochastic;
  const ref::SymmetricQuantizedRef reference = ref::quantize_symmetric_ref(widen(x), bits, block, stochastic, at);
  std::vector<float> y(n);
  dequantize_groups(module, y);

  INFO("bits " << bits << ", block " << block << ", " << compression_rounding_name(rounding));
  REQUIRE(module.scales.size() == reference.scales.size());
  std::size_t scale_mismatches = 0;
  for (std::size_t g = 0; g < module.scales.size(); ++g) scale_mismatches += static_cast<double>(module.scales[g]) != reference.scales[g];
  CHECK(scale_mismatches == 0);

  std::size_t differences = 0, outside = 0;
  double worst = 0.0;  // the largest distance / window among the differences
  for (std::size_t i = 0; i < n; ++i) {
    const double scale = reference.scales[i / group];
    // y = fl32(q scale) for the module's own q: one rounding of an exact product.
    if (!same_bits(y[i], static_cast<float>(static_cast<double>(module.q[i]) * scale)) && ++outside <= 3)
      UNSCOPED_INFO("element " << i << ": value " << y[i] << " is not fl32(" << module.q[i] << " * " << scale << ")");
    if (std::llabs(module.q[i]) > levels && ++outside <= 3) UNSCOPED_INFO("element " << i << ": q " << module.q[i] << " outside [-L, L]");
    if (module.q[i] == reference.q[i]) continue;
    ++differences;
    const double a = std::fabs(static_cast<double>(x[i]) / scale);
    const double window = (0x1p-24 + 0x1p-52) * a + (stochastic ? 0x1p-32 : 0.0);
    const double distance =
        stochastic ? integer_distance(a + 1.0 - draw_fraction(at, i)) : std::fabs(a - std::floor(a) - 0.5);
    worst = std::max(worst, distance / window);
    const bool allowed = std::llabs(module.q[i] - reference.q[i]) == 1 && distance <= window;
    if (!allowed && ++outside <= 3)
      UNSCOPED_INFO("element " << i << ": x = " << x[i] << ", q " << module.q[i] << " vs reference " << reference.q[i]
                               << "; |t| = " << a << " lies " << distance << " from the turning point, window " << window);
  }
  INFO(differences << " of " << n << " codes differ by the FP32 rounding of x / scale; worst " << worst
                   << " of the window");
  CHECK(outside == 0);
}

}  // namespace

TEST_CASE("quantize exact tier: integer tensors with amax = L 2^k match the FP64 reference bit for bit, bits 4..16, "
          "per tensor and per block (16, 37: ragged last group, one all-zero group), nearest and stochastic") {
  std::mt19937_64 rng(2026);
  for (int bits = 4; bits <= 16; ++bits)
    for (const std::int64_t block : {std::int64_t{0}, std::int64_t{16}, std::int64_t{37}})
      for (const RoundingMode rounding : {RoundingMode::nearest, RoundingMode::stochastic})
        check_exact_tier(bits, block, rounding, rng);
}

TEST_CASE("quantize exact tier by hand: 4 bits (L = 7), ties to even, the clamp, zero and underflowing groups") {
  // amax 7 gives scale 1, so q is x rounded half to even.
  const std::vector<float> x = {7.0f, 3.5f, 2.5f, -2.5f, -7.0f, 0.5f, 1.5f, -0.5f, 0.0f, -4.5f};
  const QuantizedGroups one = quantize_groups(x, 4, 0, RoundingMode::nearest, 0);
  CHECK(one.scales == std::vector<float>{1.0f});
  CHECK(one.q == std::vector<std::int32_t>{7, 4, 2, -2, -7, 0, 2, 0, 0, -4});

  // Blocks of 3: an all-zero group sends scale 0 and zeros; the last group holds one element.
  const std::vector<float> z = {0.0f, -0.0f, 0.0f, 14.0f, -7.0f, 3.0f, -1.0f};
  const QuantizedGroups blocks = quantize_groups(z, 4, 3, RoundingMode::nearest, 0);
  CHECK(blocks.scales == std::vector<float>{0.0f, 2.0f, 1.0f / 7.0f});
  CHECK(blocks.q == std::vector<std::int32_t>{0, 0, 0, 7, -4, 2, -7});  // -3.5 and 1.5: the even -4 and 2
  std::vector<float> y(z.size());
  dequantize_groups(blocks, y);
  CHECK(y == std::vector<float>{0.0f, 0.0f, 0.0f, 14.0f, -8.0f, 4.0f, -1.0f});  // -7 fl32(1/7) rounds to -1
  CHECK_FALSE(std::signbit(y[1]));

  // The clamp: amax = 15 2^-149 gives the subnormal scale fl32(15/7 2^-149) = 2^-148, so |t| = 7.5
  // lies above L = 7 (nearest alone would give 8, outside the 4-bit range) and must send 7.
  const std::vector<float> over = {15 * 0x1p-149f, -15 * 0x1p-149f, 14 * 0x1p-149f, 0x1p-149f};
  const QuantizedGroups clamped = quantize_groups(over, 4, 0, RoundingMode::nearest, 0);
  CHECK(clamped.scales == std::vector<float>{0x1p-148f});
  CHECK(clamped.q == std::vector<std::int32_t>{7, -7, 7, 0});  // 0.5: the even 0
  for (std::uint64_t stream = 0; stream < 8; ++stream) {
    const QuantizedGroups drawn = quantize_groups(over, 4, 0, RoundingMode::stochastic, stream);
    CHECK(std::vector<std::int32_t>(drawn.q.begin(), drawn.q.begin() + 3) == std::vector<std::int32_t>{7, -7, 7});
    CHECK((drawn.q[3] == 0 || drawn.q[3] == 1));
  }

  // amax = 2^-149 (the smallest subnormal): amax / 7 underflows to 0, so the group sends zeros.
  const std::vector<float> tiny = {0x1p-149f, -0x1p-149f};
  const QuantizedGroups under = quantize_groups(tiny, 4, 0, RoundingMode::stochastic, 1);
  CHECK(under.scales == std::vector<float>{0.0f});
  CHECK(under.q == std::vector<std::int32_t>{0, 0});
}

TEST_CASE("quantize general inputs (groups 2^-20..2^20, near-ties) vs the FP64 reference within the x / scale "
          "rounding budget, bits 4..16, per tensor and block 64, nearest and stochastic") {
  for (int bits = 4; bits <= 16; ++bits)
    for (const std::int64_t block : {std::int64_t{0}, std::int64_t{64}})
      for (const RoundingMode rounding : {RoundingMode::nearest, RoundingMode::stochastic})
        check_general_tier(bits, block, rounding, static_cast<std::uint64_t>(100 * bits + block));
}

// Unbiasedness. The tensor is [1, x, x, ..., x] (n = 1024): scale s = fl32(1 / L) and every x
// draws independently (its own element index; 20 steps give 20 streams), N = 20 * 1023 draws.
// Each decompressed y_j is one of two values fl32(lo s), fl32((lo + 1) s), so it lies in an
// interval of width w <= s + 2^-23 (|x| + s), and its variance is at most w^2 / 4.
// Random part (Hoeffding, which needs no normal approximation): P(|mean - E y| >= c) <=
// 2 exp(-2 N c^2 / w^2). Writing c = z sigma_max / sqrt(N) with sigma_max = w / 2, the bound is
// 2 exp(-z^2 / 2) = delta, so z = sqrt(2 ln(2 / delta)) = 6.55 for delta = 1e-9 per point (45
// points here: a correct implementation fails with probability below 5e-8). The modelling
// assumption is independence of SplitMix64 outputs, which pass BigCrush.
// Deterministic part, |E y - x|: the truncation of F to 32 bits (< 2^-32 s), t's FP32 rounding
// (|t - x / s| <= 2^-24 |x| / s, so 2^-24 |x| after the scale), y's FP32 rounding (<= 2^-24 (|x| + s)).
// With N = 20460 the random part is 0.0229 s, so a rounding biased by s / 32 fails.
TEST_CASE("stochastic quantize is unbiased: mean of 20460 seeded draws within the z-bound, bits 4, 8, 12") {
  constexpr std::size_t kN = 1024;
  constexpr int kSteps = 20;
  constexpr double kDelta = 1e-9;
  const double z = std::sqrt(2.0 * std::log(2.0 / kDelta));
  const double draws = static_cast<double>(kSteps * (kN - 1));
  double worst = 0.0;
  for (const int bits : {4, 8, 12}) {
    const CompressionConfig config = quantize_config(bits, 0, RoundingMode::stochastic, 0x5EED0000u + bits);
    const double levels = static_cast<double>(levels_of(bits));
    const double s = static_cast<float>(1.0 / levels);
    for (const double p : {0.5, 0.25, 0.9, 0.1, 0.03})
      for (const double sign : {1.0, -1.0}) {
        const double m = std::floor(levels * 0.37);
        const float x = static_cast<float>(sign * (m + p) * s);
        std::vector<float> tensor(kN, x), y(kN);
        tensor[0] = 1.0f;
        double sum = 0.0;
        for (int step = 0; step < kSteps; ++step) {
          compress_decompress(config, tensor, compression_stream(config.seed, step, 0, 0), y);
          for (std::size_t i = 1; i < kN; ++i) sum += y[i];
        }
        const double ax = std::fabs(x);
        const double w = s + 0x1p-23 * (ax + s);
        const double bound = z * (w / 2.0) / std::sqrt(draws) + 0x1p-32 * s + 0x1p-24 * ax + 0x1p-24 * (ax + s);
        const double deviation = std::fabs(sum / draws - x);
        worst = std::max(worst, deviation / bound);
        INFO("bits " << bits << ", x = " << x << " (" << m << " + " << p << " steps of " << s << ", sign " << sign
                     << "): mean off by " << deviation << " = " << deviation / s << " steps, bound " << bound
                     << " (" << deviation / bound << " of it)");
        CHECK(deviation <= bound);
      }
  }
  INFO("worst deviation: " << worst << " of the bound");
  CHECK(worst <= 1.0);
}

TEST_CASE("stochastic quantize (8 bits, block 64) reproducible: same seed same bits, another seed, step, worker or "
          "tensor other bits, streams match the reference's SplitMix64") {
  const std::vector<float> x = normal_tensor(4096, 17);
  const CompressionConfig config = quantize_config(8, 64, RoundingMode::stochastic, 99);
  const auto run = [&](std::uint64_t seed, std::int64_t step, std::int64_t worker, std::size_t tensor) {
    std::vector<float> y(x.size());
    compress_decompress(config, x, compression_stream(seed, step, worker, tensor), y);
    return y;
  };
  const auto differing = [](const std::vector<float>& a, const std::vector<float>& b) {
    std::size_t count = 0;
    for (std::size_t i = 0; i < a.size(); ++i) count += !same_bits(a[i], b[i]);
    return count;
  };
  const std::vector<float> base = run(99, 3, 1, 2);
  CHECK(differing(base, run(99, 3, 1, 2)) == 0);
  // For a uniform fraction f two independent roundings differ with probability 2 f (1 - f), 1/3 on
  // average: about 1365 of 4096; 400 is far below any plausible fluctuation.
  CHECK(differing(base, run(100, 3, 1, 2)) > 400);
  CHECK(differing(base, run(99, 4, 1, 2)) > 400);
  CHECK(differing(base, run(99, 3, 2, 2)) > 400);
  CHECK(differing(base, run(99, 3, 1, 3)) > 400);
  // Nearest never reads the draws.
  const CompressionConfig nearest = quantize_config(8, 64, RoundingMode::nearest, 99);
  std::vector<float> a(x.size()), b(x.size());
  compress_decompress(nearest, x, compression_stream(1, 0, 0, 0), a);
  compress_decompress(nearest, x, compression_stream(2, 5, 6, 7), b);
  CHECK(differing(a, b) == 0);

  for (const std::uint64_t seed : {std::uint64_t{0}, std::uint64_t{99}, ~std::uint64_t{0}})
    for (const std::int64_t step : {std::int64_t{0}, std::int64_t{1}, std::int64_t{123456789}, std::int64_t{-1}})
      for (const std::uint64_t worker : {0u, 7u})
        for (const std::size_t tensor : {std::size_t{0}, std::size_t{31}})
          CHECK(compression_stream(seed, step, worker, tensor) == ref::compression_stream_ref({seed, step, worker, tensor}));
}
