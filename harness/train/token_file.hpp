#pragma once
// A training run's token stream: the ids of a token file, checked against the model's
// vocabulary, with the file's sha256 for provenance.
//   .npy  uint16 ('<u2') or int32 ('<i4'), any shape (read in C order as one stream);
//   .bin  raw little-endian uint16, as llama2.c's pretokenizer writes its shards.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace fp8lab::train {

struct TokenStream {
  std::string source;  // "PATH (sha256 HEX)" or what made the tokens
  std::string sha256;  // of the file's bytes (of the int32 ids, little-endian, when sampled)
  std::vector<std::int32_t> tokens;
};

// Throws TensorFileError ("FILE: what is wrong", one line) for a missing or unreadable file,
// another extension, another dtype, a .bin of odd length, no tokens, or an id outside
// [0, vocab) (the first such id and its position are named).
TokenStream read_token_file(const std::filesystem::path& file, int vocab);

// The sha256 of ids as little-endian int32 (how a stream that is made, not read, is named).
std::string token_sha256(const std::vector<std::int32_t>& tokens);

}  // namespace fp8lab::train
