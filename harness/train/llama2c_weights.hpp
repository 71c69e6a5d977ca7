#pragma once
// A llama2.c checkpoint (legacy export: a 28-byte header of 7 int32 - dim, hidden_dim, layers,
// heads, kv_heads, vocab_size (negative: an unshared classifier, refused), seq_len - then the
// FP32 tensors in LlamaWeights' order, then RoPE tables that are not read) into the engine's
// weight struct. The stories260K file and its sha256: data/llama2c_checkpoint.hpp.
#include <filesystem>
#include <string>

#include "data/llama2c_checkpoint.hpp"
#include "kernels/train/llama_weights.hpp"

namespace fp8lab {

// Throws TensorFileError naming the file: missing, checksum mismatch, truncated, bad header.
LlamaWeights load_llama2c_checkpoint(const std::filesystem::path& file, const std::string& expected_sha256);

}  // namespace fp8lab
