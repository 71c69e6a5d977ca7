#include "harness/train/sparse_update.hpp"

#include <stdexcept>

#include "harness/train/gradient_compression.hpp"

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
  // The same selection as top-k gradient compression (its k, its tie rule), so that a ratio means
  // one thing in both options.
  std::vector<std::uint8_t> selected(gradient.size(), 0);
  const std::int64_t k = topk_count(static_cast<std::int64_t>(gradient.size()), ratio);
  for (const std::uint32_t i : select_topk(gradient, k).indices) selected[i] = 1;
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
