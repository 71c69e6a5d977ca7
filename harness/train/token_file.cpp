#include "harness/train/token_file.hpp"

#include <cstring>

#include "data/sha256.hpp"
#include "data/tensor_io/file_bytes.hpp"
#include "data/tensor_io/npy.hpp"
#include "data/tensor_io/tensor.hpp"

namespace fp8lab::train {
namespace {

std::vector<std::int32_t> from_u16(const std::byte* data, std::size_t count) {
  std::vector<std::int32_t> ids(count);
  for (std::size_t i = 0; i < count; ++i) {
    std::uint16_t v;
    std::memcpy(&v, data + 2 * i, 2);
    ids[i] = v;
  }
  return ids;
}

std::string bytes_sha256(const std::vector<std::byte>& bytes) {
  return sha256_hex(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

}  // namespace

TokenStream read_token_file(const std::filesystem::path& file, int vocab) {
  const std::string ext = file.extension().string();
  if (ext != ".npy" && ext != ".bin")
    throw TensorFileError(file, "a token file is .npy (uint16 or int32) or .bin (raw little-endian uint16), not '" + ext + "'");
  const std::vector<std::byte> bytes = read_file_bytes(file);
  TokenStream stream;
  stream.sha256 = bytes_sha256(bytes);
  stream.source = file.string() + " (sha256 " + stream.sha256 + ")";
  if (ext == ".bin") {
    if (bytes.size() % 2 != 0)
      throw TensorFileError(file, "a .bin token file is raw uint16, but it has an odd number of bytes (" +
                                      std::to_string(bytes.size()) + "): truncated?");
    stream.tokens = from_u16(bytes.data(), bytes.size() / 2);
  } else {
    const Tensor t = parse_npy(bytes, file);
    if (t.dtype == DType::u16) {
      stream.tokens = from_u16(t.bytes.data(), t.bytes.size() / 2);
    } else if (t.dtype == DType::i32) {
      stream.tokens.resize(t.bytes.size() / 4);
      std::memcpy(stream.tokens.data(), t.bytes.data(), t.bytes.size());
    } else {
      throw TensorFileError(file, std::string("token ids must be uint16 ('<u2') or int32 ('<i4'), not ") +
                                      dtype_name(t.dtype));
    }
  }
  if (stream.tokens.empty()) throw TensorFileError(file, "holds no tokens");
  for (std::size_t i = 0; i < stream.tokens.size(); ++i)
    if (stream.tokens[i] < 0 || stream.tokens[i] >= vocab)
      throw TensorFileError(file, "token " + std::to_string(i) + " is " + std::to_string(stream.tokens[i]) +
                                      ", outside the model's vocabulary 0.." + std::to_string(vocab - 1));
  return stream;
}

std::string token_sha256(const std::vector<std::int32_t>& tokens) {
  return sha256_hex(std::string_view(reinterpret_cast<const char*>(tokens.data()), tokens.size() * sizeof(std::int32_t)));
}

}  // namespace fp8lab::train
