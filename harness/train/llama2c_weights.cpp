#include "harness/train/llama2c_weights.hpp"

#include <cstdint>
#include <cstring>

#include "data/tensor_io/file_bytes.hpp"
#include "data/tensor_io/tensor.hpp"

namespace fp8lab {

LlamaWeights load_llama2c_checkpoint(const std::filesystem::path& file, const std::string& expected_sha256) {
  const std::vector<std::byte> bytes = read_file_bytes(file);
  LlamaWeights w;
  w.sha256 = checked_sha256(file, bytes, expected_sha256);
  w.file = file;
  if (bytes.size() < 28) throw TensorFileError(file, "truncated: shorter than the 28-byte llama2.c header");
  std::int32_t header[7];
  std::memcpy(header, bytes.data(), sizeof header);
  LlamaConfig& c = w.config;
  c = {header[0], header[1], header[2], header[3], header[4], header[5] < 0 ? -header[5] : header[5], header[6]};
  if (header[5] < 0) throw TensorFileError(file, "unshared classifier weights (negative vocab_size) are not supported");
  if (c.dim <= 0 || c.hidden_dim <= 0 || c.n_layers <= 0 || c.n_heads <= 0 || c.n_kv_heads <= 0 || c.vocab_size <= 0 ||
      c.seq_len <= 0 || c.dim % c.n_heads != 0 || c.n_heads % c.n_kv_heads != 0)
    throw TensorFileError(file, "bad header: inconsistent llama2.c config");
  const auto L = static_cast<std::size_t>(c.n_layers), D = static_cast<std::size_t>(c.dim),
             F = static_cast<std::size_t>(c.hidden_dim), V = static_cast<std::size_t>(c.vocab_size),
             KV = static_cast<std::size_t>(c.kv_dim()), H = static_cast<std::size_t>(c.head_size()),
             S = static_cast<std::size_t>(c.seq_len);
  const std::size_t floats = V * D + 2 * L * D + L * D * D * 2 + 2 * L * KV * D + 3 * L * F * D + D + S * H;
  if (bytes.size() != 28 + 4 * floats)
    throw TensorFileError(file, "truncated or not a llama2.c export: " + std::to_string(bytes.size()) +
                                    " bytes, the header's config needs " + std::to_string(28 + 4 * floats));
  const std::byte* p = bytes.data() + 28;
  const auto take = [&p](std::vector<float>& into, std::size_t n) {
    into.resize(n);
    std::memcpy(into.data(), p, n * 4);
    p += n * 4;
  };
  take(w.token_embedding, V * D);
  take(w.rms_att, L * D);
  take(w.wq, L * D * D);
  take(w.wk, L * KV * D);
  take(w.wv, L * KV * D);
  take(w.wo, L * D * D);
  take(w.rms_ffn, L * D);
  take(w.w1, L * F * D);
  take(w.w2, L * D * F);
  take(w.w3, L * F * D);
  take(w.rms_final, D);  // freq_cis tables follow; the forward pass computes RoPE itself
  return w;
}

}  // namespace fp8lab
