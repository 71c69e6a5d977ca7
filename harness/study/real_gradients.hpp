#pragma once
// Real gradients of the stories260K checkpoint for the loss-scaling study: one training step on
// the real token batch of harness/study/real_layers (the model's greedy continuation of BOS, 64 tokens).
//   "<linear>.dW"  the weight gradient of every linear layer L<l>.<wq|wk|wv|wo|w1|w2|w3>, from the
//                  training-step engine (kernels/train) under the fp32 recipe, with the FP64
//                  reference's gradient (harness/metrics/train_step_errors reference_step) beside it;
//                  "embedding.dW" is the classifier's weight gradient, which the tied embedding
//                  shares with the token lookup (llama2.c ties them); the engine's attention is
//                  naive unless asked otherwise (flash: named in `source`);
//   "<linear>.dY"  the activation gradient dLoss/dY of every linear's output (also
//                  "classifier.dY"): the engine does not expose these, so they come from the
//                  FP64 reference's backward pass (reference/llama_fp64_ref llama_backward),
//                  rounded once to FP32 for the FP32 side.
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/train/attention_kind.hpp"

namespace fp8lab {

struct RealGradient {
  std::string name;        // "L0.wq.dW", "L0.wq.dY", "embedding.dW", "classifier.dY"
  std::string gradient;    // "weight" or "activation"
  std::int64_t rows = 0, cols = 0;  // dW: out x in; dY: tokens x out
  std::vector<float> fp32;          // what an FP32 training step holds
  std::vector<double> fp64;         // the FP64 reference
  std::string source;               // where the values come from, with the checkpoint's sha256
};

struct RealGradients {
  std::string checkpoint, checkpoint_sha256;
  std::vector<RealGradient> tensors;
};

// Computed once per process and attention kind (the checkpoint's sha256 checked on load).
const RealGradients& stories260k_gradients(train::AttentionKind attention = train::AttentionKind::naive);
// Throws std::invalid_argument listing what exists (the names do not depend on the attention).
const RealGradient& find_real_gradient(const std::string& name, train::AttentionKind attention = train::AttentionKind::naive);
// The names, in model order.
std::vector<std::string> real_gradient_names();

}  // namespace fp8lab
