#include "kernels/train/model_config.hpp"

#include <stdexcept>

namespace fp8lab::train {

void ModelConfig::validate() const {
  const std::pair<const char*, int> sizes[] = {{"dim", dim},     {"hidden", hidden},     {"layers", layers},
                                               {"heads", heads}, {"kv_heads", kv_heads}, {"vocab", vocab}};
  for (const auto& [field, value] : sizes)
    if (value <= 0) throw std::invalid_argument(std::string(field) + " must be positive, not " + std::to_string(value));
  if (dim % heads != 0) throw std::invalid_argument("heads: " + std::to_string(heads) + " does not divide dim " + std::to_string(dim));
  if (heads % kv_heads != 0)
    throw std::invalid_argument("kv_heads: " + std::to_string(kv_heads) + " does not divide heads " + std::to_string(heads));
  if (head_size() % 2 != 0) throw std::invalid_argument("heads: head size " + std::to_string(head_size()) + " is odd (RoPE rotates pairs)");
}

namespace {
const ModelConfig kPresets[] = {
    {"stories260K", 64, 172, 5, 8, 4, 512},
    // A small trainable config whose dim and hidden are multiples of 128, so that 1x128 tiles
    // and 128x128 blocks cut whole rows as in DeepSeek-V3; stories260K's vocabulary.
    {"dim256", 256, 768, 4, 8, 4, 512},
    {"llama3.1-8b", 4096, 14336, 32, 32, 8, 128256},
    {"llama3.1-70b", 8192, 28672, 80, 64, 8, 128256},
    {"llama3.1-405b", 16384, 53248, 126, 128, 8, 128256},
    {"qwen2.5-72b", 8192, 29568, 80, 64, 8, 152064},
};
}  // namespace

ModelConfig model_preset(std::string_view name) {
  for (const ModelConfig& c : kPresets)
    if (c.name == name) return c;
  std::string known;
  for (const ModelConfig& c : kPresets) known += (known.empty() ? "" : ", ") + c.name;
  throw std::invalid_argument("model '" + std::string(name) + "' is not one of " + known);
}

std::vector<std::string> model_preset_names() {
  std::vector<std::string> names;
  for (const ModelConfig& c : kPresets) names.push_back(c.name);
  return names;
}

std::vector<std::string> linear_layer_names(const ModelConfig& config) {
  std::vector<std::string> names;
  for (int l = 0; l < config.layers; ++l)
    for (const char* kind : kLinearKinds) names.push_back("L" + std::to_string(l) + "." + kind);
  names.push_back("classifier");
  return names;
}

std::pair<std::int64_t, std::int64_t> linear_layer_shape(const ModelConfig& c, const std::string& layer) {
  const std::int64_t dim = c.dim, kv = c.kv_dim(), hidden = c.hidden;
  if (layer == "classifier") return {c.vocab, dim};
  const std::string kind = layer.substr(layer.find('.') + 1);
  if (kind == "wq" || kind == "wo") return {dim, dim};
  if (kind == "wk" || kind == "wv") return {kv, dim};
  if (kind == "w1" || kind == "w3") return {hidden, dim};
  if (kind == "w2") return {dim, hidden};
  throw std::invalid_argument("layer '" + layer + "' is no linear layer of model " + c.name);
}

std::int64_t parameter_count(const ModelConfig& c) {
  const std::int64_t dim = c.dim, kv = c.kv_dim(), hidden = c.hidden;
  return c.vocab * dim + c.layers * (2 * dim + 2 * dim * dim + 2 * kv * dim + 3 * hidden * dim) + dim;
}

}  // namespace fp8lab::train
