#include "harness/train/optimizer_step.hpp"

#include <algorithm>
#include <span>

#include "kernels/train/sgd.hpp"  // named_weight_values

namespace fp8lab::train {
namespace {

bool is_norm_gain(const std::string& name) { return name.find("rms") != std::string::npos; }

}  // namespace

UpdateCounts apply_adamw(const AdamWConfig& adamw, const SparseUpdateConfig& sparse, bool decay_norm_gains,
                         const std::vector<std::string>& names, std::vector<AdamWMoments>& moments, std::int64_t updates,
                         LlamaWeights& weights, const std::vector<std::vector<float>>& gradients, double lr) {
  UpdateCounts counts;
  for (std::size_t t = 0; t < names.size(); ++t) {
    const double decay = !decay_norm_gains && is_norm_gain(names[t]) ? 0.0 : adamw.weight_decay;
    const std::span<float> w = named_weight_values(weights, names[t]);
    const std::span<const float> g = gradients[t];
    const auto n = static_cast<double>(g.size());
    counts.total += n;
    if (sparse.mode == SparseMode::off) {
      adamw_update(w, g, moments[t], adamw, updates, lr, decay);
      counts.selected += n;
      counts.flops += n * kAdamWFlopsPerElement;
      continue;
    }
    const std::vector<std::uint8_t> selected = select_largest_magnitudes(g, sparse.ratio);
    const auto k = static_cast<double>(std::count(selected.begin(), selected.end(), std::uint8_t{1}));
    if (sparse.mode == SparseMode::gradient) {
      const UpdateMask mask{selected, sparse.frozen_momentum};
      adamw_update(w, g, moments[t], adamw, updates, lr, decay, &mask);
      counts.selected += k;
      counts.flops += k * kAdamWFlopsPerElement + (sparse.frozen_momentum ? (n - k) * kAdamWMomentFlopsPerElement : 0);
    } else {  // weight_mask: the whole update, then the mask on the weights themselves
      adamw_update(w, g, moments[t], adamw, updates, lr, decay);
      multiply_by_mask(w, selected);
      counts.selected += n;
      counts.flops += n * kAdamWFlopsPerElement;
    }
  }
  return counts;
}

double zero_fraction(const LlamaWeights& weights, const std::vector<std::string>& names) {
  double zeros = 0, total = 0;
  for (const std::string& name : names) {
    const std::span<const float> w = named_weight_values(weights, name);
    zeros += static_cast<double>(std::count(w.begin(), w.end(), 0.0f));
    total += static_cast<double>(w.size());
  }
  return total > 0 ? zeros / total : 0;
}

}  // namespace fp8lab::train
