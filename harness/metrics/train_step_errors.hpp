#pragma once
// Gradient errors of a training step (kernels/train) against the FP64 reference
// (reference/llama_fp64_ref) on the same FP32 weights and tokens, through the one metrics
// module: relative Frobenius norm per weight tensor, per block and over all gradients.
#include <string>
#include <vector>

#include "kernels/train/llama_weights.hpp"
#include "kernels/train/training_step.hpp"

namespace fp8lab {

struct ReferenceStep {
  double loss = 0;
  std::vector<train::NamedGradient> gradients;  // same names and order as the engine's
};
ReferenceStep reference_step(const LlamaWeights& weights, const std::vector<int>& tokens);

struct GradientErrors {
  std::vector<std::string> names;          // every weight tensor
  std::vector<double> rel_frobenius;       // of each
  std::vector<double> block_rel_frobenius; // block l: all its tensors together
  // Per weight kind, every block's tensor of that kind together ("wq": L0.wq, L1.wq, ...;
  // "embedding", "rms_final" alone), kinds in the order they first appear.
  std::vector<std::string> kind_names;
  std::vector<double> kind_rel_frobenius;
  double total_rel_frobenius = 0;          // all gradients together
};
// Throws std::invalid_argument when the two lists do not name the same tensors.
// The kind of a weight tensor: its name without the "L<l>." block prefix.
std::string weight_kind(const std::string& name);
GradientErrors gradient_errors(const std::vector<train::NamedGradient>& step, const std::vector<train::NamedGradient>& reference);

// The fixed real token sequence of the stories260K tests and benchmark: the FP64 model's own
// greedy continuation of BOS (as harness/study/real_layers uses), `count` tokens.
std::vector<int> stories260k_greedy_tokens(const LlamaWeights& weights, int count);

}  // namespace fp8lab
