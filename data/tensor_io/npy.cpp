#include "data/tensor_io/npy.hpp"

#include <charconv>
#include <cstring>
#include <string>
#include <string_view>

#include "data/tensor_io/file_bytes.hpp"

namespace fp8lab {
namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
constexpr std::string_view kBf16Descr = "[('bf16', '<u2')]";

struct DescrEntry {
  std::string_view descr;
  DType dtype;
};
constexpr DescrEntry kDescrs[] = {{"<f4", DType::f32}, {"<f8", DType::f64}, {"<f2", DType::f16},
                                  {"|u1", DType::u8},  {"<u1", DType::u8},  {"<u2", DType::u16},
                                  {"<i4", DType::i32}};

std::string_view descr_of(DType dtype) {
  if (dtype == DType::bf16) return kBf16Descr;
  for (const DescrEntry& e : kDescrs)
    if (e.dtype == dtype) return e.descr;
  return {};
}

// The text after "'key':" in the header dict, with leading blanks skipped.
std::string_view value_after_key(std::string_view header, std::string_view key, const std::filesystem::path& file) {
  const std::string quoted = "'" + std::string(key) + "'";
  std::size_t at = header.find(quoted);
  if (at == std::string_view::npos) throw TensorFileError(file, "bad header: no '" + std::string(key) + "' key");
  at = header.find(':', at + quoted.size());
  if (at == std::string_view::npos) throw TensorFileError(file, "bad header: no value for '" + std::string(key) + "'");
  std::string_view rest = header.substr(at + 1);
  while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
  return rest;
}

// Whether `value` is the Python literal `word` followed by the end of the value.
bool is_literal(std::string_view value, std::string_view word) {
  return value.starts_with(word) &&
         (value.size() == word.size() || std::string_view(", }").find(value[word.size()]) != std::string_view::npos);
}

DType parse_descr(std::string_view header, const std::filesystem::path& file) {
  const std::string_view value = value_after_key(header, "descr", file);
  if (value.starts_with(kBf16Descr)) return DType::bf16;
  if (value.empty() || value.front() != '\'') throw TensorFileError(file, "bad header: unsupported descr " + std::string(value.substr(0, 40)));
  const std::size_t close = value.find('\'', 1);
  if (close == std::string_view::npos) throw TensorFileError(file, "bad header: unterminated descr");
  return npy_descr_dtype(value.substr(1, close - 1), file);
}

std::vector<std::int64_t> parse_shape(std::string_view header, const std::filesystem::path& file) {
  std::string_view value = value_after_key(header, "shape", file);
  if (value.empty() || value.front() != '(') throw TensorFileError(file, "bad header: shape is not a tuple");
  const std::size_t close = value.find(')');
  if (close == std::string_view::npos) throw TensorFileError(file, "bad header: unterminated shape");
  std::string_view inside = value.substr(1, close - 1);
  std::vector<std::int64_t> shape;
  while (!inside.empty()) {
    while (!inside.empty() && (inside.front() == ' ' || inside.front() == ',')) inside.remove_prefix(1);
    if (inside.empty()) break;
    std::int64_t dim = 0;
    const auto [end, error] = std::from_chars(inside.data(), inside.data() + inside.size(), dim);
    if (error != std::errc() || dim < 0)
      throw TensorFileError(file, "bad header: shape entry '" + std::string(inside.substr(0, 20)) + "' is not a size");
    shape.push_back(dim);
    inside.remove_prefix(static_cast<std::size_t>(end - inside.data()));
  }
  return shape;
}

}  // namespace

DType npy_descr_dtype(std::string_view descr, const std::filesystem::path& file) {
  if (descr == kBf16Descr) return DType::bf16;
  for (const DescrEntry& e : kDescrs)
    if (e.descr == descr) return e.dtype;
  throw TensorFileError(file, "unsupported dtype '" + std::string(descr) +
                                  "' (values: <f4 <f8 <f2 and [('bf16', '<u2')]; integer arrays, read but never "
                                  "quantized: |u1 <u2 <i4)");
}

Tensor read_npy(const std::filesystem::path& file) { return parse_npy(read_file_bytes(file), file); }

Tensor parse_npy(const std::vector<std::byte>& bytes, const std::filesystem::path& file) {
  const std::string_view all(reinterpret_cast<const char*>(bytes.data()), bytes.size());
  if (!all.starts_with(kMagic)) throw TensorFileError(file, "not a .npy file (bad magic)");
  if (all.size() < 10) throw TensorFileError(file, "truncated: file ends inside the .npy preamble");
  const auto major = static_cast<unsigned char>(all[6]);
  std::size_t header_length = 0, header_start = 0;
  if (major == 1) {
    header_length = static_cast<unsigned char>(all[8]) | (static_cast<std::size_t>(static_cast<unsigned char>(all[9])) << 8);
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (all.size() < 12) throw TensorFileError(file, "truncated: file ends inside the .npy preamble");
    for (int i = 3; i >= 0; --i) header_length = (header_length << 8) | static_cast<unsigned char>(all[8 + i]);
    header_start = 12;
  } else {
    throw TensorFileError(file, "unsupported .npy format version " + std::to_string(major));
  }
  if (header_start + header_length > all.size())
    throw TensorFileError(file, "truncated: header says " + std::to_string(header_length) + " bytes, file ends first");
  const std::string_view header = all.substr(header_start, header_length);
  if (header.find('{') == std::string_view::npos || header.find('}') == std::string_view::npos)
    throw TensorFileError(file, "bad header: not a dict");

  Tensor t;
  t.dtype = parse_descr(header, file);
  const std::string_view fortran = value_after_key(header, "fortran_order", file);
  if (is_literal(fortran, "True"))
    throw TensorFileError(file, "fortran_order True is not supported (save with np.ascontiguousarray)");
  if (!is_literal(fortran, "False"))
    throw TensorFileError(file, "bad header: fortran_order is '" + std::string(fortran.substr(0, fortran.find_first_of(",}"))) +
                                    "', not True or False");
  t.shape = parse_shape(header, file);

  const std::size_t data_start = header_start + header_length;
  const std::size_t available = all.size() - data_start;
  const std::optional<std::int64_t> byte_count = checked_byte_count(t.shape, t.dtype);
  if (!byte_count)
    throw TensorFileError(file, "bad header: shape " + t.shape_string() + " of " + dtype_name(t.dtype) +
                                    " has more bytes than int64 can count");
  const auto expected = static_cast<std::size_t>(*byte_count);
  if (available < expected)
    throw TensorFileError(file, "truncated: shape " + t.shape_string() + " of " + dtype_name(t.dtype) + " needs " +
                                    std::to_string(expected) + " data bytes, file has " + std::to_string(available));
  if (available > expected)
    throw TensorFileError(file, "shape " + t.shape_string() + " of " + dtype_name(t.dtype) + " needs " +
                                    std::to_string(expected) + " data bytes, file has " + std::to_string(available) +
                                    " (shape does not match the data)");
  t.bytes.assign(bytes.begin() + static_cast<std::ptrdiff_t>(data_start), bytes.end());
  return t;
}

void write_npy(const std::filesystem::path& file, const Tensor& tensor) {
  const std::string_view descr = descr_of(tensor.dtype);
  if (descr.empty()) throw TensorFileError(file, std::string("cannot write dtype ") + dtype_name(tensor.dtype) + " as .npy");
  std::string dict = "{'descr': ";
  dict += descr.front() == '[' ? std::string(descr) : "'" + std::string(descr) + "'";
  dict += ", 'fortran_order': False, 'shape': (";
  for (std::int64_t d : tensor.shape) dict += std::to_string(d) + ", ";
  if (tensor.shape.size() > 1) dict.resize(dict.size() - 1);  // "(3, 4)" but "(3,)"
  else if (tensor.shape.size() == 1) dict.pop_back();
  dict += "), }";
  // Version 1.0: 10-byte preamble, header padded with spaces and ended by '\n' so that the
  // data starts on a 64-byte boundary (as NumPy writes it).
  const std::size_t unpadded = 10 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string preamble(kMagic);
  preamble += '\x01';
  preamble += '\x00';
  preamble += static_cast<char>(dict.size() & 0xFF);
  preamble += static_cast<char>((dict.size() >> 8) & 0xFF);
  write_file_atomically(file, preamble + dict, tensor.bytes.data(), tensor.bytes.size());
}

}  // namespace fp8lab
