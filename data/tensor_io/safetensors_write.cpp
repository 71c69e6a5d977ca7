#include "data/tensor_io/safetensors_write.hpp"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>

#include "data/tensor_io/file_bytes.hpp"

namespace fp8lab {

void write_safetensors(const std::filesystem::path& file, const std::vector<SafetensorsEntry>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  const auto fail = [&](const std::string& what) { throw std::invalid_argument(file.string() + ": " + what); };
  nlohmann::ordered_json header;
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string> names;
  std::uint64_t offset = 0;
  for (const SafetensorsEntry& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__" || !names.insert(t.name).second)
      fail("tensor name '" + t.name + "' is empty, reserved or repeated");
    std::int64_t count = 1;
    for (const std::int64_t d : t.shape) count *= d;
    if (count != static_cast<std::int64_t>(t.values.size()))
      fail("tensor '" + t.name + "': its shape holds " + std::to_string(count) + " values, not " +
           std::to_string(t.values.size()));
    const std::uint64_t end = offset + t.values.size() * sizeof(float);
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the format pads the header with spaces to 8 bytes
  std::error_code error;
  const std::filesystem::path target = write_target(file);  // a link is written through
  if (target.has_parent_path()) std::filesystem::create_directories(target.parent_path(), error);
  if (error) fail("cannot create its folder: " + error.message());
  const std::filesystem::path temporary = target.string() + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) fail("cannot create " + temporary.string() + ": " + std::strerror(errno));
    const std::uint64_t length = text.size();  // little-endian on every machine this builds for
    out.write(reinterpret_cast<const char*>(&length), sizeof length);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const SafetensorsEntry& t : tensors)
      out.write(reinterpret_cast<const char*>(t.values.data()), static_cast<std::streamsize>(t.values.size() * sizeof(float)));
    out.flush();
    if (!out) fail("cannot write " + temporary.string() + ": " + std::strerror(errno));
  }
  std::filesystem::rename(temporary, target, error);
  if (error) fail("cannot rename " + temporary.string() + " over it: " + error.message());
}

}  // namespace fp8lab
