#pragma once
// The weights of a Llama model as the engine takes them: llama2.c's layout, FP32, every matrix
// row-major [out, in] (y = W x), each kind of block tensor concatenated over the blocks. Filled
// from a llama2.c checkpoint by the harness (harness/train/llama2c_weights.hpp) or by the seeded
// initialisation (kernels/train/model_weights.hpp).
#include <filesystem>
#include <string>
#include <vector>

namespace fp8lab {

struct LlamaConfig {
  int dim = 0, hidden_dim = 0, n_layers = 0, n_heads = 0, n_kv_heads = 0, vocab_size = 0, seq_len = 0;
  int head_size() const { return dim / n_heads; }
  int kv_dim() const { return n_kv_heads * head_size(); }
};

// Weights as stored: every matrix row-major [out, in] (y = W x), per layer concatenated.
struct LlamaWeights {
  LlamaConfig config;
  std::vector<float> token_embedding;  // [vocab, dim]
  std::vector<float> rms_att, rms_ffn;  // [layers, dim]
  std::vector<float> wq, wk, wv, wo;    // [layers, dim, dim] / [layers, kv_dim, dim] / ... / [layers, dim, dim]
  std::vector<float> w1, w2, w3;        // [layers, hidden, dim] / [layers, dim, hidden] / [layers, hidden, dim]
  std::vector<float> rms_final;         // [dim]
  std::filesystem::path file;  // where they were read from (empty for a seeded init)
  std::string sha256;          // of that file
};

}  // namespace fp8lab
