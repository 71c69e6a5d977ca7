#pragma once
// An n-D tensor as it sits in a file: dtype, shape, raw little-endian bytes. The loaders
// (npy.hpp, safetensors.hpp) produce it; to_float32 turns it into what the kernels take.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace fp8lab {

enum class DType { f32, f64, f16, bf16, u8, u16, i32, e4m3, e5m2 };

const char* dtype_name(DType d);
std::size_t dtype_size(DType d);

// Every problem with a tensor file: the message is one line, "FILE: what is wrong".
class TensorFileError : public std::runtime_error {
 public:
  TensorFileError(const std::filesystem::path& file, const std::string& problem)
      : std::runtime_error(file.string() + ": " + problem) {}
};

// Element and byte counts of a shape, or nothing when an extent is negative or the product
// overflows int64 (a file header can claim any shape: check before multiplying or allocating).
std::optional<std::int64_t> checked_element_count(std::span<const std::int64_t> shape);
std::optional<std::int64_t> checked_byte_count(std::span<const std::int64_t> shape, DType dtype);

struct Tensor {
  DType dtype = DType::f32;
  std::vector<std::int64_t> shape;
  std::vector<std::byte> bytes;  // numel() * dtype_size(dtype), little-endian

  std::int64_t numel() const;  // throws std::invalid_argument when the count overflows int64
  std::string shape_string() const;  // "4096x7168"

  static Tensor from_f32(std::vector<std::int64_t> shape, const std::vector<float>& values);
  static Tensor from_u8(std::vector<std::int64_t> shape, const std::vector<std::uint8_t>& values);
  static Tensor from_bf16_bits(std::vector<std::int64_t> shape, const std::vector<std::uint16_t>& bits);

  // Values as FP32: exact for every dtype but f64 (rounded to nearest). Raw integer
  // dtypes (u8, plain u16, i32: codes and token ids) are not numbers to quantize: TensorFileError naming `source`.
  std::vector<float> to_float32(const std::filesystem::path& source) const;
};

// Tensor::to_float32 on raw little-endian elements of `dtype` (bytes.size() / dtype_size of
// them): the one conversion every tensor source goes through (files, the Python module).
std::vector<float> to_float32(DType dtype, std::span<const std::byte> bytes, const std::filesystem::path& source);

// Reads .npy or .safetensors by extension. `name` picks a tensor in a .safetensors file
// (may be empty when the file holds exactly one); it must be empty for .npy.
Tensor read_tensor_file(const std::filesystem::path& file, const std::string& name = "");

}  // namespace fp8lab
