#pragma once
// Reading .safetensors files: an 8-byte little-endian header length N, N bytes of JSON
// ({"name": {"dtype", "shape", "data_offsets": [begin, end]}, "__metadata__": {...}}), then
// the data. dtypes read: F32, F64, F16, BF16, U8, F8_E4M3, F8_E5M2.
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "data/tensor_io/tensor.hpp"

namespace fp8lab {

// The tensor called `name`; with an empty name, the only tensor of a one-tensor file.
Tensor read_safetensors(const std::filesystem::path& file, const std::string& name);
std::vector<std::string> safetensors_names(const std::filesystem::path& file);
// The same from the file's bytes (`file` names it in errors): what the fuzz target drives.
Tensor parse_safetensors(std::vector<std::byte> bytes, const std::filesystem::path& file, const std::string& name);
std::vector<std::string> safetensors_names(std::vector<std::byte> bytes, const std::filesystem::path& file);

}  // namespace fp8lab
