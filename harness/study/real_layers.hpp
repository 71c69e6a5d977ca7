#pragma once
// Real operands for the GEMM studies: the stories260K checkpoint run through the FP64
// Llama reference on a real prompt (the model's own greedy continuation of BOS, the known
// TinyStories opening), capturing every linear layer's input X, weight W and output
// gradient dY. Layer names: "stories260K/L<l>.<wq|wk|wv|wo|w1|w2|w3>" and "stories260K/classifier".
#include <string>
#include <vector>

#include "harness/train/llama2c_weights.hpp"
#include "reference/llama_fp64_ref.hpp"

namespace fp8lab {

inline constexpr const char* kRealLayerPrefix = "stories260K/";
inline constexpr int kRealLayerTokens = 64;  // prompt length T (BOS + 63 greedy tokens)

ref::LlamaModel to_reference_model(const LlamaWeights& weights);

struct RealLayers {
  std::string checkpoint, checkpoint_sha256, prompt_text;
  std::vector<int> tokens;
  double loss = 0;
  std::vector<ref::LinearCapture> linears;  // names without the prefix
};

// Loaded once per process (the checkpoint found through find_data_file, sha256 checked).
const RealLayers& stories260k_layers();
const ref::LinearCapture& find_real_layer(const std::string& name);  // with the prefix; throws std::invalid_argument

// What `fp8lab layers` lists: every real layer a study accepts, with its shape and source.
struct RealLayerShape {
  std::string name;  // with the prefix
  std::int64_t out_features = 0, in_features = 0, tokens = 0;
  std::string source;
};
std::vector<RealLayerShape> real_layer_shapes();  // throws when the checkpoint cannot be loaded

}  // namespace fp8lab
