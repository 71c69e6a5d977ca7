// Gradient compression's error feedback (harness/train/gradient_compression.hpp): a worker's
// compressor gives the same bits whatever the thread and tensor order; the telescoping sum of
// decompressed values and the final residual stays within its FP32 rounding bound of the sum of
// gradients; top-k with error feedback sends every persistent coordinate within a derived
// number of steps.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <thread>
#include <vector>

#include "harness/train/gradient_compression.hpp"
#include "tests/support/gradient_compression_cases.hpp"

using namespace fp8lab;
using namespace fp8lab::train;

using test::normal_tensor;
using test::quantize_config;
using test::same_bits;
using test::topk_config;

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
