#pragma once
// The shape of a Llama-architecture model (llama2.c: RMSNorm, RoPE, causal grouped-query
// attention, SwiGLU, classifier tied to the token embedding) and of one training step.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fp8lab::train {

struct ModelConfig {
  std::string name = "custom";
  int dim = 0, hidden = 0, layers = 0, heads = 0, kv_heads = 0, vocab = 0;
  int head_size() const { return dim / heads; }
  int kv_dim() const { return kv_heads * head_size(); }

  // Throws std::invalid_argument naming the field: non-positive sizes, dim not divisible by
  // heads, heads not divisible by kv_heads, an odd head size (RoPE rotates pairs).
  void validate() const;
};

// Shapes of public models (numbers from their config.json). The engine ties the classifier
// to the embedding, as llama2.c does; these models do not, so their weight bytes in a
// shapes-only run lack one vocab x dim matrix (stated wherever the figures are used).
//   stories260K, dim256 (fp8lab's own: 256 x 768, 4 layers, 8 heads, 4 KV heads, vocab 512),
//   llama3.1-8b, llama3.1-70b, llama3.1-405b, qwen2.5-72b
ModelConfig model_preset(std::string_view name);  // throws std::invalid_argument listing the names
std::vector<std::string> model_preset_names();

// The linear layers of a model, in the names recipes use: "L<l>.<wq|wk|wv|wo|w1|w2|w3>"
// and "classifier".
inline constexpr const char* kLinearKinds[] = {"wq", "wk", "wv", "wo", "w1", "w2", "w3"};
std::vector<std::string> linear_layer_names(const ModelConfig& config);
// out x in of a linear layer's weight, by its name above ("L3.w2" or "w2", "classifier"): wq, wo
// dim x dim; wk, wv kv_dim x dim; w1, w3 hidden x dim; w2 dim x hidden; classifier vocab x dim.
// Throws std::invalid_argument for a name that is no linear layer.
std::pair<std::int64_t, std::int64_t> linear_layer_shape(const ModelConfig& config, const std::string& layer);

// Trained parameters of the engine's model (classifier tied to the embedding): vocab dim +
// layers (2 dim + 2 dim^2 + 2 kv_dim dim + 3 hidden dim) + dim.
std::int64_t parameter_count(const ModelConfig& config);

}  // namespace fp8lab::train
