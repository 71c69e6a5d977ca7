#include "data/tensor_io/tensor.hpp"

#include <bit>
#include <cstring>

#include "data/tensor_io/npy.hpp"
#include "data/tensor_io/safetensors.hpp"
#include "kernels/formats/float_formats.hpp"

static_assert(std::endian::native == std::endian::little, "tensor files are read on little-endian hosts only");

namespace fp8lab {

const char* dtype_name(DType d) {
  switch (d) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::u8: return "u8";
    case DType::u16: return "u16";
    case DType::i32: return "i32";
    case DType::e4m3: return "e4m3";
    case DType::e5m2: return "e5m2";
  }
  return "?";
}

std::size_t dtype_size(DType d) {
  switch (d) {
    case DType::f64: return 8;
    case DType::f32: case DType::i32: return 4;
    case DType::f16: case DType::bf16: case DType::u16: return 2;
    case DType::u8: case DType::e4m3: case DType::e5m2: return 1;
  }
  return 1;
}

std::optional<std::int64_t> checked_element_count(std::span<const std::int64_t> shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return std::nullopt;
  return n;
}

std::optional<std::int64_t> checked_byte_count(std::span<const std::int64_t> shape, DType dtype) {
  std::int64_t bytes = 0;
  const std::optional<std::int64_t> n = checked_element_count(shape);
  if (!n || __builtin_mul_overflow(*n, static_cast<std::int64_t>(dtype_size(dtype)), &bytes)) return std::nullopt;
  return bytes;
}

std::int64_t Tensor::numel() const {
  const std::optional<std::int64_t> n = checked_element_count(shape);
  if (!n) throw std::invalid_argument("tensor shape " + shape_string() + " has more elements than int64 can count");
  return *n;
}

std::string Tensor::shape_string() const {
  if (shape.empty()) return "scalar";
  std::string s;
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

namespace {

template <class T>
Tensor make(DType dtype, std::vector<std::int64_t> shape, const std::vector<T>& values) {
  Tensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  if (static_cast<std::int64_t>(values.size()) != t.numel())
    throw std::invalid_argument("tensor of shape " + t.shape_string() + " given " + std::to_string(values.size()) +
                                " values");
  t.bytes.resize(values.size() * sizeof(T));
  std::memcpy(t.bytes.data(), values.data(), t.bytes.size());
  return t;
}

template <class T>
T load(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

}  // namespace

Tensor Tensor::from_f32(std::vector<std::int64_t> shape, const std::vector<float>& values) {
  return make(DType::f32, std::move(shape), values);
}
Tensor Tensor::from_u8(std::vector<std::int64_t> shape, const std::vector<std::uint8_t>& values) {
  return make(DType::u8, std::move(shape), values);
}
Tensor Tensor::from_bf16_bits(std::vector<std::int64_t> shape, const std::vector<std::uint16_t>& bits) {
  return make(DType::bf16, std::move(shape), bits);
}

std::vector<float> Tensor::to_float32(const std::filesystem::path& source) const {
  return fp8lab::to_float32(dtype, std::span<const std::byte>(bytes.data(), static_cast<std::size_t>(numel()) * dtype_size(dtype)),
                            source);
}

std::vector<float> to_float32(DType dtype, std::span<const std::byte> bytes, const std::filesystem::path& source) {
  const std::size_t n = bytes.size() / dtype_size(dtype);
  std::vector<float> out(n);
  const std::byte* p = bytes.data();
  const std::size_t size = dtype_size(dtype);
  for (std::size_t i = 0; i < n; ++i, p += size) {
    switch (dtype) {
      case DType::f32: out[i] = load<float>(p); break;
      case DType::f64: out[i] = static_cast<float>(load<double>(p)); break;
      case DType::f16: out[i] = decode<FP16>(load<std::uint16_t>(p)); break;
      case DType::bf16: out[i] = decode<BF16>(load<std::uint16_t>(p)); break;
      case DType::e4m3: out[i] = decode<E4M3>(load<std::uint8_t>(p)); break;
      case DType::e5m2: out[i] = decode<E5M2>(load<std::uint8_t>(p)); break;
      case DType::u8:
      case DType::u16:
      case DType::i32:
        throw TensorFileError(source, std::string("dtype ") + dtype_name(dtype) +
                                          " holds integers, not floating-point values (bf16 in .npy must be "
                                          "saved as [('bf16', '<u2')], see data/README.md)");
    }
  }
  return out;
}

Tensor read_tensor_file(const std::filesystem::path& file, const std::string& name) {
  const std::string ext = file.extension().string();
  if (ext == ".npy") {
    if (!name.empty()) throw TensorFileError(file, "a .npy file holds one tensor; --name '" + name + "' does not apply");
    return read_npy(file);
  }
  if (ext == ".safetensors") return read_safetensors(file, name);
  throw TensorFileError(file, "unknown tensor file type '" + ext + "' (expected .npy or .safetensors)");
}

}  // namespace fp8lab
