#pragma once
// The stories260K data files (llama2.c legacy export and its tokenizer), read in place: the
// repository never contains them. The checkpoint's weights are read by the harness into the
// engine's struct (harness/train/llama2c_weights.hpp); this file finds data files and reads the tokenizer. Search order: $FP8LAB_DATA_DIR/stories260K/,
// then ../shared/data/stories260K/ beside the source tree, then data/stories260K/.
// The file's sha256 must match the published one (see data/README.md).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace fp8lab {

struct Tokenizer {
  std::vector<std::string> pieces;  // by token id
  std::string decode(const std::vector<int>& tokens) const;  // llama2.c rules: BOS prints nothing, a space after it is dropped
};

inline constexpr const char* kStories260kSha256 = "b0a507e7ad0f626624f17112325e66691f9076d622e1d3274d103d00299f2696";
inline constexpr const char* kTok512Sha256 = "037cb335abb25d1fa9e8ecae30ed2a3a8ace9302862ebcdc05d51a6bbb10c312";

// The first existing `name` in the search path; throws TensorFileError listing where it looked.
std::filesystem::path find_data_file(const std::string& name);

// The sha256 of a file's bytes; throws TensorFileError naming the file when `expected` is not
// empty and differs.
std::string checked_sha256(const std::filesystem::path& file, const std::vector<std::byte>& bytes, const std::string& expected);
Tokenizer load_llama2c_tokenizer(const std::filesystem::path& file, int vocab_size, const std::string& expected_sha256);

}  // namespace fp8lab
