#include "data/llama2c_checkpoint.hpp"

#include <cstdlib>
#include <cstring>

#include "data/sha256.hpp"
#include "data/tensor_io/file_bytes.hpp"
#include "data/tensor_io/tensor.hpp"

namespace fp8lab {
std::string checked_sha256(const std::filesystem::path& file, const std::vector<std::byte>& bytes, const std::string& expected) {
  const std::string got = sha256_hex(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
  if (!expected.empty() && got != expected)
    throw TensorFileError(file, "checksum mismatch: sha256 " + got + ", expected " + expected);
  return got;
}

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

Tokenizer load_llama2c_tokenizer(const std::filesystem::path& file, int vocab_size, const std::string& expected_sha256) {
  const std::vector<std::byte> bytes = read_file_bytes(file);
  checked_sha256(file, bytes, expected_sha256);
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
