#pragma once
// Plain SGD on the FP32 master weights of a llama2.c model, for the training runs of the
// loss-scaling studies: w <- fl32(w - fl32(learning_rate * g)), element by element, in FP32
// (the build has -ffp-contract=off, so the two roundings are the ones written). No momentum,
// no weight decay: the runs study the scale, not the optimizer.
#include <span>
#include <string>

#include "kernels/train/llama_weights.hpp"

namespace fp8lab::train {

// The values of tensor `name` (as ModelWeights::for_each names it: "embedding", "L3.wq",
// "rms_final", ...) inside the checkpoint's arrays; throws std::invalid_argument for an unknown name.
std::span<float> named_weight_values(LlamaWeights& weights, const std::string& name);
std::span<const float> named_weight_values(const LlamaWeights& weights, const std::string& name);

// Throws std::invalid_argument for an unknown name or a gradient of the wrong size.
void sgd_step(LlamaWeights& weights, const std::string& name, std::span<const float> gradient, float learning_rate);

}  // namespace fp8lab::train
