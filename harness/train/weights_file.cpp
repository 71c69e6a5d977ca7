#include "harness/train/weights_file.hpp"

#include "data/tensor_io/safetensors_write.hpp"
#include "kernels/train/sgd.hpp"

namespace fp8lab::train {

void write_weights_safetensors(const std::filesystem::path& file, const LlamaWeights& weights,
                               std::map<std::string, std::string> metadata) {
  const LlamaConfig& c = weights.config;
  const std::int64_t dim = c.dim, hidden = c.hidden_dim, kv = c.kv_dim();
  std::vector<std::pair<std::string, std::vector<std::int64_t>>> shapes{{"embedding", {c.vocab_size, dim}}};
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "L" + std::to_string(l) + ".";
    for (const auto& [name, shape] : std::vector<std::pair<const char*, std::vector<std::int64_t>>>{
             {"rms_att", {dim}}, {"wq", {dim, dim}}, {"wk", {kv, dim}}, {"wv", {kv, dim}}, {"wo", {dim, dim}},
             {"rms_ffn", {dim}}, {"w1", {hidden, dim}}, {"w2", {dim, hidden}}, {"w3", {hidden, dim}}})
      shapes.emplace_back(p + name, shape);
  }
  shapes.emplace_back("rms_final", std::vector<std::int64_t>{dim});
  std::vector<SafetensorsEntry> entries;
  for (const auto& [name, shape] : shapes) entries.push_back({name, shape, named_weight_values(weights, name)});
  for (const auto& [key, value] : std::map<std::string, int>{{"dim", c.dim},
                                                             {"hidden_dim", c.hidden_dim},
                                                             {"n_layers", c.n_layers},
                                                             {"n_heads", c.n_heads},
                                                             {"n_kv_heads", c.n_kv_heads},
                                                             {"vocab_size", c.vocab_size},
                                                             {"seq_len", c.seq_len}})
    metadata[key] = std::to_string(value);
  metadata["format"] = "fp8lab llama (llama2.c layout: RoPE on consecutive pairs, classifier = embedding)";
  write_safetensors(file, entries, metadata);
}

}  // namespace fp8lab::train
