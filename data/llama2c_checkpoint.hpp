#pragma once
// The stories260K checkpoint (llama2.c legacy export) and its tokenizer, read in place:
// the repository never contains the file. Search order: $FP8LAB_DATA_DIR/stories260K/,
// then ../shared/data/stories260K/ beside the source tree, then data/stories260K/.
// The file's sha256 must match the published one (see data/README.md).
#include <cstdint>
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
  std::filesystem::path file;
  std::string sha256;
};

struct Tokenizer {
  std::vector<std::string> pieces;  // by token id
  std::string decode(const std::vector<int>& tokens) const;  // llama2.c rules: BOS prints nothing, a space after it is dropped
};

inline constexpr const char* kStories260kSha256 = "b0a507e7ad0f626624f17112325e66691f9076d622e1d3274d103d00299f2696";
inline constexpr const char* kTok512Sha256 = "037cb335abb25d1fa9e8ecae30ed2a3a8ace9302862ebcdc05d51a6bbb10c312";

// The first existing `name` in the search path; throws TensorFileError listing where it looked.
std::filesystem::path find_data_file(const std::string& name);

// Throws TensorFileError naming the file: missing, checksum mismatch, truncated, bad header.
LlamaWeights load_llama2c_checkpoint(const std::filesystem::path& file, const std::string& expected_sha256);
Tokenizer load_llama2c_tokenizer(const std::filesystem::path& file, int vocab_size, const std::string& expected_sha256);

}  // namespace fp8lab
