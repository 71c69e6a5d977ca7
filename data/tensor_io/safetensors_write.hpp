#pragma once
// Writing .safetensors files (the layout safetensors.hpp reads): F32 tensors, row-major, in the
// order given, with string metadata, so that a user loads them with
// safetensors.torch.load_file or safetensors.numpy.load_file. Written to FILE.tmp and renamed
// over FILE, so an interrupted write never leaves half a file under the name; the folder is
// created when missing.
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

namespace fp8lab {

struct SafetensorsEntry {
  std::string name;
  std::vector<std::int64_t> shape;  // the product must equal values.size()
  std::span<const float> values;
};

// Throws std::invalid_argument naming the file for a shape that does not match its values, a
// repeated or empty name, or a file that cannot be written.
void write_safetensors(const std::filesystem::path& file, const std::vector<SafetensorsEntry>& tensors,
                       const std::map<std::string, std::string>& metadata);

}  // namespace fp8lab
