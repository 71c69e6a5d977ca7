#pragma once
// A trained model's weights as a .safetensors file for the user: every tensor in FP32 under the
// engine's names ("embedding" [vocab, dim], "L<l>.rms_att" [dim], "L<l>.wq" [dim, dim],
// "L<l>.wk" / "L<l>.wv" [kv_dim, dim], "L<l>.wo" [dim, dim], "L<l>.rms_ffn" [dim],
// "L<l>.w1" / "L<l>.w3" [hidden, dim], "L<l>.w2" [dim, hidden], "rms_final" [dim]; matrices
// [out, in], y = W x; the classifier is the embedding), and the model config in the metadata.
// RoPE rotates consecutive pairs (llama2.c's convention), not Hugging Face's halves: loading the
// tensors into a Hugging Face Llama needs llama2.c's export permutation of wq and wk.
#include <filesystem>
#include <map>
#include <string>

#include "kernels/train/llama_weights.hpp"

namespace fp8lab::train {

// Throws std::invalid_argument naming the file when it cannot be written.
void write_weights_safetensors(const std::filesystem::path& file, const LlamaWeights& weights,
                               std::map<std::string, std::string> metadata);

}  // namespace fp8lab::train
