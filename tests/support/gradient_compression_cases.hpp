#pragma once
// What the gradient compression tests (tests/unit/gradient_compression*_test.cpp) share: the
// configurations they build, seeded Gaussian gradients, FP32 bit equality and widening to FP64.
#include <bit>
#include <cstdint>
#include <random>
#include <vector>

#include "harness/train/gradient_compression.hpp"

namespace fp8lab::test {

inline bool same_bits(float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }

inline std::vector<double> widen(const std::vector<float>& x) { return {x.begin(), x.end()}; }

inline train::CompressionConfig quantize_config(int bits, std::int64_t block, RoundingMode rounding, std::uint64_t seed = 7) {
  train::CompressionConfig config;
  config.kind = train::CompressionKind::quantize;
  config.bits = bits;
  config.block = block;
  config.rounding = rounding;
  config.seed = seed;
  return config;
}

inline train::CompressionConfig topk_config(double ratio) {
  train::CompressionConfig config;
  config.kind = train::CompressionKind::topk;
  config.topk_ratio = ratio;
  return config;
}

inline std::vector<float> normal_tensor(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

}  // namespace fp8lab::test
