#include "data/llama2c_checkpoint.hpp"

#include <cstdlib>
#include <cstring>

#include "data/sha256.hpp"
#include "data/tensor_io/file_bytes.hpp"
#include "data/tensor_io/tensor.hpp"

namespace fp8lab {
namespace {

void check_sha256(const std::filesystem::path& file, const std::vector<std::byte>& bytes, const std::string& expected) {
  const std::string got = sha256_hex(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  if (!expected.empty() && got != expected)
    throw TensorFileError(file, "checksum mismatch: sha256 " + got + ", expected " + expected);
}

}  // namespace

std::filesystem::path find_data_file(const std::string& name) {
  std::vector<std::filesystem::path> places;
  if (const char* dir = std::getenv("FP8LAB_DATA_DIR"); dir && *dir) places.push_back(std::filesystem::path(dir) / name);
  const std::filesystem::path source = FP8LAB_SOURCE_DIR;
  places.push_back(source.parent_path() / "shared" / "data" / name);
  places.push_back(source / "data" / name);
  std::string looked;
  for (const auto& p : places) {
    if (std::filesystem::exists(p)) return p;
    looked += (looked.empty() ? "" : ", ") + p.string();
  }
  throw TensorFileError(name, "not found (looked in " + looked + "; set FP8LAB_DATA_DIR, see data/README.md)");
}

LlamaWeights load_llama2c_checkpoint(const std::filesystem::path& file, const std::string& expected_sha256) {
  const std::vector<std::byte> bytes = read_file_bytes(file);
  check_sha256(file, bytes, expected_sha256);
  LlamaWeights w;
  w.file = file;
  w.sha256 = sha256_hex(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
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

Tokenizer load_llama2c_tokenizer(const std::filesystem::path& file, int vocab_size, const std::string& expected_sha256) {
  const std::vector<std::byte> bytes = read_file_bytes(file);
  check_sha256(file, bytes, expected_sha256);
  Tokenizer t;
  std::size_t at = 4;  // max_token_length
  for (int i = 0; i < vocab_size; ++i) {
    std::int32_t length = 0;
    if (at + 8 > bytes.size()) throw TensorFileError(file, "truncated at token " + std::to_string(i));
    std::memcpy(&length, bytes.data() + at + 4, 4);  // {float score, int32 len, bytes}
    at += 8;
    if (length < 0 || at + static_cast<std::size_t>(length) > bytes.size())
      throw TensorFileError(file, "truncated or bad length at token " + std::to_string(i));
    t.pieces.emplace_back(reinterpret_cast<const char*>(bytes.data() + at), static_cast<std::size_t>(length));
    at += static_cast<std::size_t>(length);
  }
  return t;
}

std::string Tokenizer::decode(const std::vector<int>& tokens) const {
  std::string text;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] == 1) continue;  // BOS marks a start; llama2.c prints no text for it
    std::string piece = pieces.at(static_cast<std::size_t>(tokens[i]));
    if (i > 0 && tokens[i - 1] == 1 && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);  // after BOS
    if (piece.size() == 6 && piece.starts_with("<0x") && piece.ends_with(">"))               // raw byte tokens
      piece = std::string(1, static_cast<char>(std::stoi(piece.substr(3, 2), nullptr, 16)));
    text += piece;
  }
  return text;
}

}  // namespace fp8lab
