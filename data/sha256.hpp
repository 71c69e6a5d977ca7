#pragma once
// SHA-256 (FIPS 180-4), for checksums of data files and study specs.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace fp8lab {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, std::size_t size);
  std::string hex_digest();  // finishes the hash; lowercase hex

 private:
  void block(const std::uint8_t* p);
  std::uint32_t state_[8];
  std::uint8_t buffer_[64];
  std::size_t buffered_ = 0;
  std::uint64_t length_ = 0;
};

std::string sha256_hex(std::string_view bytes);
std::string sha256_file(const std::filesystem::path& file);  // throws TensorFileError when unreadable

}  // namespace fp8lab
