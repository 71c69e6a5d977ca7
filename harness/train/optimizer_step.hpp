#pragma once
// Step 6 of a training run (harness/train/training_run.hpp): AdamW on every tensor, through the
// dynamic sparse-update options (harness/train/sparse_update.hpp), counting what it did.
#include <cstdint>
#include <string>
#include <vector>

#include "harness/train/adamw.hpp"
#include "harness/train/sparse_update.hpp"
#include "kernels/train/llama_weights.hpp"

namespace fp8lab::train {

// What one update did (dynamic sparse updates count their selection).
struct UpdateCounts {
  double selected = 0, total = 0, flops = 0;
  double update_fraction() const { return total > 0 ? selected / total : 0; }
};

// AdamW on each named tensor of `weights` with its gradient and moments, step t = `updates`;
// weight decay on every tensor, or not on the RMSNorm gains (decay_norm_gains false). FLOPs: the
// element loops that run, kAdamWFlopsPerElement each, and for the frozen elements whose moments
// still track their gradient the moment updates' share (kAdamWMomentFlopsPerElement).
UpdateCounts apply_adamw(const AdamWConfig& adamw, const SparseUpdateConfig& sparse, bool decay_norm_gains,
                         const std::vector<std::string>& names, std::vector<AdamWMoments>& moments, std::int64_t updates,
                         LlamaWeights& weights, const std::vector<std::vector<float>>& gradients, double lr);

// The fraction of the named weights that are exactly zero.
double zero_fraction(const LlamaWeights& weights, const std::vector<std::string>& names);

}  // namespace fp8lab::train
