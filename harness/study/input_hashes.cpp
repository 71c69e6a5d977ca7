#include "harness/study/input_hashes.hpp"

namespace fp8lab {

std::map<std::string, std::string> input_file_hashes(const std::vector<std::string>& operand_sources) {
  constexpr std::string_view kMarker = " (sha256 ";
  std::map<std::string, std::string> hashes;
  for (const std::string& text : operand_sources) {
    for (std::size_t at = text.find(kMarker); at != std::string::npos; at = text.find(kMarker, at + 1)) {
      // The path runs back to "=" (x=PATH) or ": " (real: PATH) or the start.
      const std::size_t equals = text.rfind('=', at), colon = text.rfind(": ", at);
      std::size_t start = 0;
      if (equals != std::string::npos) start = equals + 1;
      if (colon != std::string::npos && colon + 2 > start) start = colon + 2;
      const std::size_t hash_start = at + kMarker.size(), hash_end = text.find(')', hash_start);
      if (hash_end == std::string::npos || start >= at) continue;
      hashes[text.substr(start, at - start)] = text.substr(hash_start, hash_end - hash_start);
    }
  }
  return hashes;
}

std::optional<std::string> changed_input_file(const std::map<std::string, std::string>& a, const std::string& where_a,
                                              const std::map<std::string, std::string>& b, const std::string& where_b) {
  for (const auto& [path, hash] : a) {
    const auto it = b.find(path);
    if (it != b.end() && it->second != hash)
      return path + ": sha256 " + hash.substr(0, 12) + "... in " + where_a + " but " + it->second.substr(0, 12) +
             "... in " + where_b;
  }
  return std::nullopt;
}

}  // namespace fp8lab
