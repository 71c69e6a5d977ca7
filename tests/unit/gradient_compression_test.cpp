// Gradient compression with error feedback (harness/train/gradient_compression.hpp).
// Exact tier: inputs whose scales and x / scale are exact, module and FP64 reference
// (reference/gradient_compression_ref) bit for bit. Statistical tier: general inputs within the
// budget one FP32 rounding of x / scale allows; stochastic rounding unbiased within a derived
// bound; error feedback's telescoping sum within its FP32 rounding bound; top-k with error
// feedback sending every persistent coordinate within a derived number of steps. Then counts,
// bits, ratios, residual access and the errors bad configurations get.
#include <catch2/catch.hpp>
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "harness/train/gradient_compression.hpp"
#include "reference/gradient_compression_ref.hpp"

using namespace fp8lab;
using namespace fp8lab::train;
using Catch::Matchers::StartsWith;

namespace {

bool same_bits(float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }

std::vector<double> widen(const std::vector<float>& x) { return {x.begin(), x.end()}; }

CompressionConfig quantize_config(int bits, std::int64_t block, RoundingMode rounding, std::uint64_t seed = 7) {
  CompressionConfig config;
  config.kind = CompressionKind::quantize;
  config.bits = bits;
  config.block = block;
  config.rounding = rounding;
  config.seed = seed;
  return config;
}

CompressionConfig topk_config(double ratio) {
  CompressionConfig config;
  config.kind = CompressionKind::topk;
  config.topk_ratio = ratio;
  return config;
}

std::int64_t levels_of(int bits) { return (std::int64_t{1} << (bits - 1)) - 1; }

std::vector<float> normal_tensor(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

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

TEST_CASE("WorkerCompressor (stochastic 6 bits, block 64, error feedback): 4 workers x 3 tensors x 6 steps give the "
          "same bits sequentially in tensor order and on 4 threads in reverse tensor order") {
  const std::vector<std::int64_t> sizes = {1000, 37, 512};
  constexpr int kWorkers = 4, kSteps = 6;
  CompressionConfig config = quantize_config(6, 64, RoundingMode::stochastic, 4242);
  config.error_feedback = true;
  std::vector<std::vector<std::vector<std::vector<float>>>> gradients(kSteps);  // [step][worker][tensor]
  for (int s = 0; s < kSteps; ++s)
    for (int w = 0; w < kWorkers; ++w) {
      gradients[s].emplace_back();
      for (std::size_t t = 0; t < sizes.size(); ++t)
        gradients[s][w].push_back(normal_tensor(static_cast<std::size_t>(sizes[t]), 1000 * s + 10 * w + t));
    }
  using Outputs = std::vector<std::vector<std::vector<std::vector<float>>>>;
  const auto run_worker = [&](int w, bool reverse, Outputs& out) {
    WorkerCompressor compressor(config, static_cast<std::size_t>(w));
    for (int s = 0; s < kSteps; ++s)
      for (std::size_t j = 0; j < sizes.size(); ++j) {
        const std::size_t t = reverse ? sizes.size() - 1 - j : j;
        out[s][w][t] = compressor.compress(t, gradients[s][w][t], s).values;
      }
  };
  const auto empty = [&] {
    return Outputs(kSteps, std::vector<std::vector<std::vector<float>>>(kWorkers, std::vector<std::vector<float>>(sizes.size())));
  };
  Outputs sequential = empty(), threaded = empty();
  for (int w = 0; w < kWorkers; ++w) run_worker(w, false, sequential);
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) threads.emplace_back([&, w] { run_worker(w, true, threaded); });
  for (std::thread& thread : threads) thread.join();
  std::size_t differing = 0;
  for (int s = 0; s < kSteps; ++s)
    for (int w = 0; w < kWorkers; ++w)
      for (std::size_t t = 0; t < sizes.size(); ++t)
        for (std::size_t i = 0; i < sequential[s][w][t].size(); ++i)
          differing += !same_bits(sequential[s][w][t][i], threaded[s][w][t][i]);
  CHECK(differing == 0);
  // Workers differ from one another (their own draws), as they must for independent noise.
  std::size_t across = 0;
  for (std::size_t i = 0; i < 1000; ++i) across += !same_bits(sequential[0][0][0][i], sequential[0][1][0][i]);
  CHECK(across > 0);
}

// Error feedback telescopes. With x_t = fl32(g_t + r_{t-1}) = g_t + r_{t-1} + e_t and
// r_t = fl32(x_t - y_t) = x_t - y_t + e'_t, summing y_t = g_t + r_{t-1} - r_t + e_t + e'_t over
// t = 1..T with r_0 = 0 gives sum y + r_T - sum g = sum (e_t + e'_t). A round-to-nearest FP32
// result v of a sum or difference is off by at most 2^-24 |v| (half an ulp of its binade; exact
// when subnormal), so per element |sum y + r_T - sum g| <= 2^-24 sum_t (|x_t| + |r_t|). The test
// adds its own FP64 summation error, (T + 2) 2^-53 sum of the magnitudes summed.
TEST_CASE("error feedback: over 60 steps sum of decompressed + final residual = sum of gradients within the FP32 "
          "rounding bound (quantize 4-bit nearest, 8-bit stochastic block 32, topk 0.05)") {
  constexpr std::size_t kN = 512;
  constexpr int kSteps = 60;
  CompressionConfig stochastic8 = quantize_config(8, 32, RoundingMode::stochastic, 5);
  const CompressionConfig configs[] = {quantize_config(4, 0, RoundingMode::nearest), stochastic8, topk_config(0.05)};
  for (const CompressionConfig& base : configs) {
    for (const bool feedback : {true, false}) {
      CompressionConfig config = base;
      config.error_feedback = feedback;
      WorkerCompressor compressor(config, 1);
      std::vector<double> sum_y(kN, 0.0), sum_g(kN, 0.0), bound(kN, 0.0), magnitudes(kN, 0.0);
      std::mt19937_64 rng(77);
      for (int step = 0; step < kSteps; ++step) {
        std::vector<float> g = normal_tensor(kN, 500 + step);
        const float magnitude = std::ldexp(1.0f, static_cast<int>(rng() % 7) - 3);  // steps of 2^-3 .. 2^3
        for (float& v : g) v *= magnitude;
        std::vector<float> x(kN);
        const std::span<const float> before = compressor.residual(0);
        for (std::size_t i = 0; i < kN; ++i) x[i] = g[i] + (before.empty() ? 0.0f : before[i]);  // empty at first
        const std::vector<float> y = compressor.compress(0, g, step).values;
        const std::span<const float> after = compressor.residual(0);
        for (std::size_t i = 0; i < kN; ++i) {
          const double r = feedback ? after[i] : 0.0;
          sum_y[i] += y[i];
          sum_g[i] += g[i];
          bound[i] += 0x1p-24 * (std::fabs(x[i]) + std::fabs(r));
          magnitudes[i] += std::fabs(y[i]) + std::fabs(g[i]);
        }
      }
      double worst = 0.0, largest_gap = 0.0;
      std::size_t outside = 0;
      for (std::size_t i = 0; i < kN; ++i) {
        const double r = feedback ? compressor.residual(0)[i] : 0.0;
        const double gap = std::fabs(sum_y[i] + r - sum_g[i]);
        const double allowed = bound[i] + (kSteps + 2) * 0x1p-53 * (magnitudes[i] + std::fabs(r));
        worst = std::max(worst, gap / allowed);
        largest_gap = std::max(largest_gap, gap);
        outside += gap > allowed;
      }
      INFO(compression_kind_name(config.kind) << " bits " << config.bits << " block " << config.block << " "
                                              << compression_rounding_name(config.rounding) << ", error feedback "
                                              << feedback << ": worst " << worst << " of the bound, largest gap "
                                              << largest_gap);
      if (feedback)
        CHECK(outside == 0);
      else
        CHECK(outside > kN / 2);  // without it the dropped part is simply lost: the identity fails
    }
  }
}

// Top-k with error feedback sends every coordinate of a persistent gradient. Take g constant over
// steps, every |g_i| >= g_min, G = sum |g_i|, k sent per step. If coordinate i is unsent in steps
// 1..s, its |x_i| at step t is t |g_i| >= t g_min, so each of the k coordinates sent at step t has
// |x| >= t g_min. Signs never mix (each coordinate keeps its gradient's sign, and a sent
// coordinate's residual is 0), so the sent magnitude over s steps is at most the s G that came in:
// k g_min s (s + 1) / 2 <= s G, i.e. s <= 2 G / (k g_min) - 1. So every coordinate is first sent at
// a step <= floor(2 G / (k g_min)) (steps counted from 1). The values (multiples of 1/4, below 2^20)
// keep every FP32 sum exact.
TEST_CASE("error feedback with top-k (n = 64, k = 1 and 4) sends every persistent coordinate within 2G / (k g_min) "
          "steps, without it only the k largest are ever sent") {
  constexpr std::size_t kN = 64;
  std::vector<float> g(kN);
  std::mt19937_64 rng(8);
  double total = 0.0;
  for (std::size_t i = 0; i < kN; ++i) {
    g[i] = (rng() % 2 ? 1.0f : -1.0f) * (1.0f + static_cast<float>(i % 5) / 4.0f);
    total += std::fabs(g[i]);
  }
  const double g_min = 1.0;
  for (const double ratio : {1.0 / 64.0, 4.0 / 64.0}) {
    const std::int64_t k = topk_count(kN, ratio);
    const auto bound_steps = static_cast<std::int64_t>(std::floor(2.0 * total / (static_cast<double>(k) * g_min)));
    for (const bool feedback : {true, false}) {
      CompressionConfig config = topk_config(ratio);
      config.error_feedback = feedback;
      WorkerCompressor compressor(config, 0);
      std::vector<std::int64_t> first_sent(kN, -1);
      for (std::int64_t step = 1; step <= bound_steps; ++step) {
        const std::vector<float> y = compressor.compress(0, g, step).values;
        std::int64_t nonzero = 0;
        for (std::size_t i = 0; i < kN; ++i)
          if (y[i] != 0.0f) {
            ++nonzero;
            if (first_sent[i] < 0) first_sent[i] = step;
          }
        CHECK(nonzero == k);
      }
      const auto never = std::count(first_sent.begin(), first_sent.end(), std::int64_t{-1});
      INFO("k = " << k << ", bound " << bound_steps << " steps, error feedback " << feedback << ": last first send at step "
                  << *std::max_element(first_sent.begin(), first_sent.end()) << ", " << never << " never sent");
      if (feedback)
        CHECK(never == 0);
      else
        CHECK(never == static_cast<std::int64_t>(kN) - k);
    }
  }
}

TEST_CASE("topk: k = max(1, ceil(ratio n)) with decimal ratios, ties to the lower index, module = reference, bits") {
  CHECK(topk_count(100, 0.07) == 7);  // 0.07 * 100 is 7.000000000000001 in double
  CHECK(topk_count(100, 0.14) == 14);  // 14.000000000000002
  CHECK(topk_count(30, 0.1) == 3);
  CHECK(topk_count(1000, 0.01) == 10);
  CHECK(topk_count(10, 0.01) == 1);  // at least one
  CHECK(topk_count(7, 1.0) == 7);
  CHECK(topk_count(3, 0.5) == 2);    // ceil(1.5)
  CHECK(topk_count(100, 0.333) == 34);
  CHECK(topk_count(3, 1.0 / 3.0) == 1);
  CHECK(topk_count(1001, 0.001) == 2);  // ceil(1.001)
  CHECK(topk_count(0, 0.5) == 0);

  const std::vector<float> x = {1.0f, -3.0f, 3.0f, 2.0f, -3.0f, 0.0f, -0.0f};
  CHECK(select_topk(x, 2).indices == std::vector<std::uint32_t>{1, 2});
  CHECK(select_topk(x, 3).indices == std::vector<std::uint32_t>{1, 2, 4});
  CHECK(select_topk(x, 3).values == std::vector<float>{-3.0f, 3.0f, -3.0f});
  CHECK(select_topk(x, 6).indices == std::vector<std::uint32_t>{0, 1, 2, 3, 4, 5});  // 0 before -0
  std::vector<float> y(x.size());
  compress_decompress(topk_config(0.5), x, 0, y);  // k = ceil(3.5) = 4
  CHECK(y == std::vector<float>{0.0f, -3.0f, 3.0f, 2.0f, -3.0f, 0.0f, 0.0f});

  // Many ties (integers -8..8) on 1000 elements, several k: module and reference keep the same set.
  std::mt19937_64 rng(12);
  std::vector<float> ties(1000);
  for (float& v : ties) v = static_cast<float>(static_cast<int>(rng() % 17) - 8);
  for (const std::int64_t k : {1, 7, 100, 333, 999, 1000}) {
    const TopKSelection module = select_topk(ties, k);
    const ref::TopKRef reference = ref::topk_ref(widen(ties), k);
    INFO("k = " << k);
    CHECK(module.indices.size() == static_cast<std::size_t>(k));
    CHECK(std::vector<std::int64_t>(module.indices.begin(), module.indices.end()) == reference.indices);
    std::vector<float> dense(ties.size());
    scatter_topk(module, dense);
    CHECK(widen(dense) == reference.values);
  }

  // Bits: k (32 + 32) per tensor, summed over a step's tensors.
  WorkerCompressor compressor(topk_config(0.01), 0);
  CHECK(compressor.compress(0, normal_tensor(1000, 1), 0).bits_sent == 64u * 10);
  compressor.compress(1, normal_tensor(30, 2), 0);
  compressor.compress(2, normal_tensor(5, 3), 0);
  CHECK(compressor.step_bits() == 64u * (10 + 1 + 1));
  CHECK(compressor.step_elements() == 1035u);
  CHECK(compressor.step_compression_ratio() == Approx(64.0 * 12 / (32.0 * 1035)).epsilon(1e-15));
}

TEST_CASE("compression ratio: 8-bit per tensor (8n + 32) / 32n, per block 128, 4-bit, topk 2k / n, none 1, "
          "step counts restart with each step and totals do not") {
  const std::int64_t n = 1000;
  CHECK(compressed_bits(quantize_config(8, 0, RoundingMode::nearest), n) == 8u * 1000 + 32);
  CHECK(compression_ratio(quantize_config(8, 0, RoundingMode::nearest), n) == (8.0 * 1000 + 32) / (32.0 * 1000));
  CHECK(compressed_bits(quantize_config(8, 128, RoundingMode::nearest), n) == 8u * 1000 + 32 * 8);  // 7 full + 1 of 104
  CHECK(compressed_bits(quantize_config(4, 100, RoundingMode::stochastic), n) == 4u * 1000 + 32 * 10);
  CHECK(compressed_bits(quantize_config(16, 0, RoundingMode::nearest), 1) == 16u + 32);
  CHECK(compressed_bits(topk_config(0.01), n) == 64u * 10);
  CHECK(compression_ratio(topk_config(0.01), n) == 0.02);
  CHECK(compression_ratio(topk_config(1.0), n) == 2.0);  // values and indices: twice the tensor
  CHECK(compression_ratio(CompressionConfig{}, n) == 1.0);
  CHECK(compressed_bits(quantize_config(8, 0, RoundingMode::nearest), 0) == 0u);
  CHECK(compression_ratio(0, 0) == 1.0);

  WorkerCompressor compressor(quantize_config(8, 0, RoundingMode::nearest), 0);
  compressor.compress(0, normal_tensor(1000, 4), 0);
  compressor.compress(1, normal_tensor(24, 5), 0);
  CHECK(compressor.step_bits() == 8u * 1024 + 64);
  CHECK(compressor.step_compression_ratio() == (8.0 * 1024 + 64) / (32.0 * 1024));
  compressor.compress(1, normal_tensor(24, 6), 1);
  CHECK(compressor.step_bits() == 8u * 24 + 32);
  CHECK(compressor.step_elements() == 24u);
  CHECK(compressor.total_bits() == 8u * 1048 + 96);
  CHECK(compressor.total_elements() == 1048u);
}

TEST_CASE("residuals: bytes, read and restore (a checkpoint round trip gives the same bits), none without feedback") {
  const std::vector<std::size_t> sizes = {300, 17};
  CompressionConfig config = quantize_config(5, 16, RoundingMode::stochastic, 3);
  WorkerCompressor a(config, 2);
  CHECK(a.residual_bytes() == 0u);  // no tensor seen yet
  CHECK(a.residual(0).empty());
  for (std::int64_t step = 0; step < 5; ++step)
    for (std::size_t t = 0; t < sizes.size(); ++t) a.compress(t, normal_tensor(sizes[t], 10 * step + t), step);
  CHECK(a.residual_bytes() == 4u * (300 + 17));
  CHECK(a.residual(1).size() == 17u);
  CHECK(a.tensor_count() == 2u);
  const std::vector<float> saved0(a.residual(0).begin(), a.residual(0).end());
  const std::vector<float> saved1(a.residual(1).begin(), a.residual(1).end());
  CHECK(std::any_of(saved0.begin(), saved0.end(), [](float v) { return v != 0.0f; }));

  WorkerCompressor b(config, 2);
  b.restore_residual(1, saved1);  // any order; an unseen tensor takes the restored size
  b.restore_residual(0, saved0);
  CHECK(b.residual_bytes() == a.residual_bytes());
  std::size_t differing = 0;
  for (std::int64_t step = 5; step < 9; ++step)
    for (std::size_t t = 0; t < sizes.size(); ++t) {
      const std::vector<float> g = normal_tensor(sizes[t], 10 * step + t);
      const std::vector<float> ya = a.compress(t, g, step).values, yb = b.compress(t, g, step).values;
      for (std::size_t i = 0; i < g.size(); ++i) differing += !same_bits(ya[i], yb[i]);
    }
  CHECK(differing == 0);
  CHECK_THROWS_WITH(b.restore_residual(0, saved1), StartsWith("WorkerCompressor: residual of tensor 0"));

  // Without error feedback (or with none) there is no residual; y is C of the gradient alone.
  config.error_feedback = false;
  WorkerCompressor plain(config, 2);
  const std::vector<float> g = normal_tensor(300, 1);
  std::vector<float> direct(300);
  compress_decompress(config, g, compression_stream(config.seed, 4, 2, 0), direct);
  plain.compress(0, g, 3);
  const std::vector<float> y = plain.compress(0, g, 4).values;
  CHECK(plain.residual_bytes() == 0u);
  CHECK(plain.residual(0).empty());
  CHECK_THROWS_WITH(plain.restore_residual(0, saved0), StartsWith("WorkerCompressor: no residuals"));
  std::size_t off = 0;
  for (std::size_t i = 0; i < y.size(); ++i) off += !same_bits(y[i], direct[i]);
  CHECK(off == 0);
  CompressionConfig none;
  none.error_feedback = true;
  WorkerCompressor uncompressed(none, 0);
  const CompressedTensor same = uncompressed.compress(0, g, 0);
  CHECK(uncompressed.residual_bytes() == 0u);
  off = 0;
  for (std::size_t i = 0; i < g.size(); ++i) off += !same_bits(same.values[i], g[i]);
  CHECK(off == 0);
  CHECK(same.bits_sent == 32u * 300);
}

TEST_CASE("non-finite gradients (an overflowed step) pass through unchanged and leave the residual as it was") {
  WorkerCompressor compressor(quantize_config(8, 0, RoundingMode::nearest), 0);
  compressor.compress(0, std::vector<float>{1.0f, 0.3f, -0.2f, 0.01f}, 0);
  const std::vector<float> kept(compressor.residual(0).begin(), compressor.residual(0).end());
  const CompressedTensor sent = compressor.compress(0, std::vector<float>{INFINITY, 0.5f, NAN, 1.0f}, 1);
  const std::vector<float>& y = sent.values;
  CHECK(sent.bits_sent == 8u * 4 + 32);
  CHECK(std::isinf(y[0]));
  CHECK(std::isnan(y[2]));
  CHECK(y[1] == 0.5f + kept[1]);
  CHECK(std::vector<float>(compressor.residual(0).begin(), compressor.residual(0).end()) == kept);
  CHECK_THROWS_WITH(quantize_groups(y, 8, 0, RoundingMode::nearest, 0), StartsWith("quantize_groups: the input has a non-finite"));
  CHECK_THROWS_WITH(select_topk(y, 1), StartsWith("select_topk: the input has a non-finite"));
}

TEST_CASE("bad configurations are refused with the spec's field name first") {
  CHECK(parse_compression_kind("topk") == CompressionKind::topk);
  CHECK(std::string(compression_kind_name(parse_compression_kind("quantize"))) == "quantize");
  CHECK(std::string(compression_kind_name(parse_compression_kind("none"))) == "none");
  CHECK(parse_compression_rounding("stochastic") == RoundingMode::stochastic);
  CHECK_THROWS_WITH(parse_compression_kind("zip"), StartsWith("compression: 'zip'"));
  CHECK_THROWS_WITH(parse_compression_rounding("up"), StartsWith("compression_rounding: 'up'"));

  for (const int bits : {3, 17, 0, -8}) {
    INFO("bits " << bits);
    CHECK_THROWS_WITH(quantize_config(bits, 0, RoundingMode::nearest).validate(), StartsWith("compression_bits: must be in 4..16"));
  }
  for (const int bits : {4, 16}) CHECK_NOTHROW(quantize_config(bits, 0, RoundingMode::nearest).validate());
  CHECK_THROWS_WITH(quantize_config(8, -1, RoundingMode::nearest).validate(), StartsWith("compression_block: "));
  for (const double ratio : {0.0, -0.1, 1.5, std::nan(""), static_cast<double>(INFINITY)}) {
    INFO("topk_ratio " << ratio);
    CHECK_THROWS_WITH(topk_config(ratio).validate(), StartsWith("topk_ratio: must be in (0, 1]"));
  }
  CHECK_NOTHROW(topk_config(1.0).validate());
  // Fields the kind does not read are not checked (as LrSchedule's).
  CompressionConfig none;
  none.bits = 2;
  none.topk_ratio = 0.0;
  CHECK_NOTHROW(none.validate());

  CHECK_THROWS_WITH(WorkerCompressor(topk_config(2.0), 0), StartsWith("topk_ratio: "));
  CHECK_THROWS_WITH(WorkerCompressor(quantize_config(20, 0, RoundingMode::nearest), 0), StartsWith("compression_bits: "));
  // A tensor keeps the size of its first call.
  WorkerCompressor compressor(topk_config(0.5), 0);
  compressor.compress(0, std::vector<float>(4), 0);
  CHECK_THROWS_WITH(compressor.compress(0, std::vector<float>(5), 1), StartsWith("WorkerCompressor: tensor 0 has 4 elements"));
  std::vector<float> out(3);
  CHECK_THROWS_AS(compressor.compress_into(1, std::vector<float>(4), 1, out), std::invalid_argument);
}
