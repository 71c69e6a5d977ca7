#include "kernels/train/sgd.hpp"

#include <stdexcept>

namespace fp8lab::train {

// The slice of the checkpoint's arrays that holds tensor `name`: every block's tensor of one
// kind has the same size, stored block after block.
std::span<float> named_weight_values(LlamaWeights& w, const std::string& name) {
  if (name == "embedding") return w.token_embedding;
  if (name == "rms_final") return w.rms_final;
  const std::size_t dot = name.find('.');
  if (name.size() < 4 || name[0] != 'L' || dot == std::string::npos)
    throw std::invalid_argument("unknown weight tensor '" + name + "'");
  std::size_t used = 0;
  const int layer = std::stoi(name.substr(1, dot - 1), &used);
  const std::string kind = name.substr(dot + 1);
  std::vector<float>* all = kind == "rms_att" ? &w.rms_att : kind == "rms_ffn" ? &w.rms_ffn : kind == "wq" ? &w.wq
                            : kind == "wk" ? &w.wk : kind == "wv" ? &w.wv : kind == "wo" ? &w.wo : kind == "w1" ? &w.w1
                            : kind == "w2" ? &w.w2 : kind == "w3" ? &w.w3 : nullptr;
  const int layers = w.config.n_layers;
  if (!all || used != dot - 1 || layer < 0 || layer >= layers || all->size() % static_cast<std::size_t>(layers) != 0)
    throw std::invalid_argument("unknown weight tensor '" + name + "'");
  const std::size_t per_layer = all->size() / static_cast<std::size_t>(layers);
  return std::span<float>(*all).subspan(static_cast<std::size_t>(layer) * per_layer, per_layer);
}

std::span<const float> named_weight_values(const LlamaWeights& w, const std::string& name) {
  return named_weight_values(const_cast<LlamaWeights&>(w), name);  // the same slice, only read
}

void sgd_step(LlamaWeights& weights, const std::string& name, std::span<const float> gradient, float learning_rate) {
  const std::span<float> w = named_weight_values(weights, name);
  if (w.size() != gradient.size())
    throw std::invalid_argument("sgd_step: tensor '" + name + "' has " + std::to_string(w.size()) + " values, the gradient " +
                                std::to_string(gradient.size()));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = w[i] - learning_rate * gradient[i];
}

}  // namespace fp8lab::train
