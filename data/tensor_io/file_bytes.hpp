#pragma once
// Whole-file reads and crash-safe writes shared by the tensor loaders.
#include <cstddef>
#include <filesystem>
#include <string_view>
#include <vector>

namespace fp8lab {

// Throws TensorFileError ("FILE: cannot open: reason") when the file cannot be read.
std::vector<std::byte> read_file_bytes(const std::filesystem::path& file);

// The file a write to PATH replaces: PATH, or, when PATH is a symbolic link, the file the chain
// of links ends at (created if the last link dangles), so a link is written through rather
// than replaced. Throws TensorFileError for a chain of more than 32 links (a loop).
std::filesystem::path write_target(const std::filesystem::path& path);

// Writes to write_target(FILE).tmp-PID and renames it over write_target(FILE), so a reader
// never sees a half-written file and a failed write never damages an existing one.
void write_file_atomically(const std::filesystem::path& file, std::string_view header, const std::byte* data,
                           std::size_t size);

}  // namespace fp8lab
