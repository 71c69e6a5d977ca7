#include "harness/train/sparse_update.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace fp8lab::train {

SparseMode parse_sparse_mode(const std::string& text) {
  if (text == "off") return SparseMode::off;
  if (text == "gradient") return SparseMode::gradient;
  if (text == "weight_mask") return SparseMode::weight_mask;
  throw std::invalid_argument("sparse_update: '" + text + "' is not one of off, gradient, weight_mask");
}

const char* sparse_mode_name(SparseMode mode) {
  switch (mode) {
    case SparseMode::off: return "off";
    case SparseMode::gradient: return "gradient";
    case SparseMode::weight_mask: return "weight_mask";
  }
  return "?";
}

void SparseUpdateConfig::validate() const {
  if (!(ratio > 0 && ratio <= 1)) throw std::invalid_argument("sparse_ratio: must be in (0, 1]");
  if (frozen_momentum && mode != SparseMode::gradient)
    throw std::invalid_argument("sparse_frozen_momentum: applies to sparse_update = \"gradient\" only");
}

std::vector<std::uint8_t> select_largest_magnitudes(std::span<const float> gradient, double ratio) {
  const std::size_t n = gradient.size();
  std::vector<std::uint8_t> selected(n, 0);
  if (n == 0) return selected;
  // ceil in double: ratio * n is exact for the n of any model here (n < 2^53), up to one rounding
  // of the product, which can only move k across an integer when ratio * n is within an ulp of it.
  const auto k = std::min(n, std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(ratio * static_cast<double>(n)))));
  if (k == n) {
    std::fill(selected.begin(), selected.end(), 1);
    return selected;
  }
  std::vector<std::uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  const auto larger = [&](std::uint32_t a, std::uint32_t b) {
    const float ma = std::fabs(gradient[a]), mb = std::fabs(gradient[b]);
    return ma != mb ? ma > mb : a < b;  // a strict total order: exactly k chosen, ties to the lower index
  };
  std::nth_element(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(), larger);
  for (std::size_t i = 0; i < k; ++i) selected[order[i]] = 1;
  return selected;
}

std::size_t multiply_by_mask(std::span<float> weights, std::span<const std::uint8_t> selected) {
  if (weights.size() != selected.size()) throw std::invalid_argument("multiply_by_mask: weights and mask differ in size");
  std::size_t zeros = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    if (!selected[i]) weights[i] *= 0.0f;
    zeros += weights[i] == 0.0f;
  }
  return zeros;
}

}  // namespace fp8lab::train
