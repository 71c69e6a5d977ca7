#include "data/tensor_io/file_bytes.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>

#include "data/tensor_io/tensor.hpp"

namespace fp8lab {

std::vector<std::byte> read_file_bytes(const std::filesystem::path& file) {
  std::error_code error;
  const std::filesystem::file_status status = std::filesystem::status(file, error);
  if (std::filesystem::is_directory(status)) throw TensorFileError(file, "is a directory, not a tensor file");
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status))
    throw TensorFileError(file, "is not a regular file");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw TensorFileError(file, std::string("cannot open: ") + std::strerror(errno));
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) throw TensorFileError(file, "cannot read (not a regular file?)");
  in.seekg(0);
  std::vector<std::byte> bytes(static_cast<std::size_t>(size));
  if (!in.read(reinterpret_cast<char*>(bytes.data()), size)) throw TensorFileError(file, "read failed");
  return bytes;
}

std::filesystem::path write_target(const std::filesystem::path& path) {
  std::filesystem::path target = path;
  for (int links = 0; links <= 32; ++links) {
    std::error_code error;
    if (!std::filesystem::is_symlink(target, error)) return target;
    const std::filesystem::path next = std::filesystem::read_symlink(target, error);
    if (error) throw TensorFileError(path, "cannot follow the link: " + error.message());
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  throw TensorFileError(path, "cannot follow the link: more than 32 links (a loop?)");
}

void write_file_atomically(const std::filesystem::path& named, std::string_view header, const std::byte* data,
                           std::size_t size) {
  const std::filesystem::path file = write_target(named);
  const std::filesystem::path temporary = file.string() + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw TensorFileError(file, std::string("cannot write: ") + std::strerror(errno));
    out.write(header.data(), static_cast<std::streamsize>(header.size()));
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    out.close();
    if (!out) {
      std::filesystem::remove(temporary);
      throw TensorFileError(file, "write failed (disk full?)");
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, file, error);
  if (error) {
    std::filesystem::remove(temporary);
    throw TensorFileError(file, "cannot replace: " + error.message());
  }
}

}  // namespace fp8lab
