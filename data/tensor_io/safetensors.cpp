#include "data/tensor_io/safetensors.hpp"

#include <algorithm>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>

#include "data/tensor_io/file_bytes.hpp"

namespace fp8lab {
namespace {

struct Parsed {
  std::vector<std::byte> bytes;
  nlohmann::json header;
  std::size_t data_start = 0;
};

Parsed parse(std::vector<std::byte> bytes, const std::filesystem::path& file) {
  Parsed p;
  p.bytes = std::move(bytes);
  if (p.bytes.size() < 8) throw TensorFileError(file, "truncated: shorter than the 8-byte header length");
  std::uint64_t header_length = 0;
  std::memcpy(&header_length, p.bytes.data(), 8);
  if (header_length > p.bytes.size() - 8)
    throw TensorFileError(file, "truncated or not safetensors: header length " + std::to_string(header_length) +
                                    " exceeds the file's " + std::to_string(p.bytes.size() - 8) + " remaining bytes");
  const char* text = reinterpret_cast<const char*>(p.bytes.data() + 8);
  try {
    p.header = nlohmann::json::parse(text, text + header_length);
  } catch (const nlohmann::json::parse_error& e) {
    throw TensorFileError(file, "bad header: JSON error at byte " + std::to_string(e.byte));
  } catch (const nlohmann::json::exception& e) {  // e.g. out_of_range: a number like 1e400
    throw TensorFileError(file, std::string("bad header: ") + e.what());
  }
  if (!p.header.is_object()) throw TensorFileError(file, "bad header: not a JSON object");
  p.data_start = 8 + static_cast<std::size_t>(header_length);
  return p;
}

DType parse_dtype(const std::string& name, const std::filesystem::path& file, const std::string& tensor) {
  if (name == "F32") return DType::f32;
  if (name == "F64") return DType::f64;
  if (name == "F16") return DType::f16;
  if (name == "BF16") return DType::bf16;
  if (name == "U8") return DType::u8;
  if (name == "F8_E4M3") return DType::e4m3;
  if (name == "F8_E5M2") return DType::e5m2;
  throw TensorFileError(file, "tensor '" + tensor + "': unsupported dtype '" + name +
                                  "' (supported: F32 F64 F16 BF16 U8 F8_E4M3 F8_E5M2)");
}

// The safetensors format stores each tensor's bytes once: two tensors whose data_offsets
// overlap are a corrupt (or hostile) header, refused whichever tensor is read.
void require_disjoint_offsets(const nlohmann::json& header, const std::filesystem::path& file) {
  struct Span {
    std::uint64_t begin, end;
    std::string name;
  };
  std::vector<Span> spans;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__" || !value.is_object() || !value.contains("data_offsets")) continue;
    const nlohmann::json& o = value["data_offsets"];
    if (!o.is_array() || o.size() != 2 || !o[0].is_number_unsigned() || !o[1].is_number_unsigned()) continue;
    const auto begin = o[0].get<std::uint64_t>(), end = o[1].get<std::uint64_t>();
    if (begin < end) spans.push_back({begin, end, key});
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
  for (std::size_t i = 1; i < spans.size(); ++i)
    if (spans[i].begin < spans[i - 1].end)
      throw TensorFileError(file, "bad header: tensors '" + spans[i - 1].name + "' and '" + spans[i].name +
                                      "' overlap in the data (data_offsets [" + std::to_string(spans[i - 1].begin) +
                                      ", " + std::to_string(spans[i - 1].end) + "] and [" +
                                      std::to_string(spans[i].begin) + ", " + std::to_string(spans[i].end) + "])");
}

std::vector<std::string> names_of(const nlohmann::json& header) {
  std::vector<std::string> names;
  for (const auto& [key, value] : header.items())
    if (key != "__metadata__") names.push_back(key);
  return names;
}

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

std::vector<std::string> safetensors_names(const std::filesystem::path& file) {
  return names_of(parse(read_file_bytes(file), file).header);
}

std::vector<std::string> safetensors_names(std::vector<std::byte> bytes, const std::filesystem::path& file) {
  return names_of(parse(std::move(bytes), file).header);
}

Tensor read_safetensors(const std::filesystem::path& file, const std::string& name) {
  return parse_safetensors(read_file_bytes(file), file, name);
}

Tensor parse_safetensors(std::vector<std::byte> bytes, const std::filesystem::path& file, const std::string& name) {
  const Parsed p = parse(std::move(bytes), file);
  const std::vector<std::string> names = names_of(p.header);
  std::string chosen = name;
  if (chosen.empty()) {
    if (names.size() != 1)
      throw TensorFileError(file, "holds " + std::to_string(names.size()) + " tensors; pick one with --name (" +
                                      joined(names) + ")");
    chosen = names.front();
  }
  if (!p.header.contains(chosen) || chosen == "__metadata__")
    throw TensorFileError(file, "no tensor named '" + chosen + "' (has: " + joined(names) + ")");
  require_disjoint_offsets(p.header, file);
  const nlohmann::json& entry = p.header.at(chosen);
  const auto field_error = [&](const std::string& field, const std::string& why) {
    return TensorFileError(file, "tensor '" + chosen + "': field '" + field + "' " + why);
  };
  if (!entry.is_object()) throw field_error(chosen, "is not an object");
  if (!entry.contains("dtype") || !entry["dtype"].is_string()) throw field_error("dtype", "is missing or not a string");
  if (!entry.contains("shape") || !entry["shape"].is_array()) throw field_error("shape", "is missing or not an array");
  if (!entry.contains("data_offsets") || !entry["data_offsets"].is_array() || entry["data_offsets"].size() != 2)
    throw field_error("data_offsets", "is missing or not [begin, end]");

  Tensor t;
  t.dtype = parse_dtype(entry["dtype"].get<std::string>(), file, chosen);
  for (const auto& d : entry["shape"]) {
    if (!d.is_number_unsigned()) throw field_error("shape", "holds a non-size entry " + d.dump());
    if (d.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      throw field_error("shape", "holds the entry " + d.dump() + ", larger than int64");
    t.shape.push_back(d.get<std::int64_t>());
  }
  const auto& offsets = entry["data_offsets"];
  if (!offsets[0].is_number_unsigned() || !offsets[1].is_number_unsigned())
    throw field_error("data_offsets", "holds a non-size entry");
  const auto begin = offsets[0].get<std::uint64_t>(), end = offsets[1].get<std::uint64_t>();
  const std::size_t data_size = p.bytes.size() - p.data_start;
  if (begin > end) throw field_error("data_offsets", "has begin > end");
  if (end > data_size)
    throw TensorFileError(file, "truncated: tensor '" + chosen + "' ends at data byte " + std::to_string(end) +
                                    ", the file has " + std::to_string(data_size));
  const std::optional<std::int64_t> byte_count = checked_byte_count(t.shape, t.dtype);
  if (!byte_count)
    throw field_error("shape", t.shape_string() + " of " + dtype_name(t.dtype) + " has more bytes than int64 can count");
  const auto expected = static_cast<std::uint64_t>(*byte_count);
  if (end - begin != expected)
    throw field_error("shape", t.shape_string() + " of " + dtype_name(t.dtype) + " needs " + std::to_string(expected) +
                                   " bytes but data_offsets span " + std::to_string(end - begin));
  const auto first = p.bytes.begin() + static_cast<std::ptrdiff_t>(p.data_start + begin);
  t.bytes.assign(first, first + static_cast<std::ptrdiff_t>(expected));
  return t;
}

}  // namespace fp8lab
