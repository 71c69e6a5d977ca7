#pragma once
// Which input files a results file was computed from, by content: the operand_source texts
// of its rows name files as "PATH (sha256 HEX)". --resume and merge compare these so that
// results from two versions of one tensor file never end up in one results file.
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fp8lab {

// PATH -> sha256 for every "PATH (sha256 HEX)" in the texts.
std::map<std::string, std::string> input_file_hashes(const std::vector<std::string>& operand_sources);

// "PATH: sha256 changed from A... (WHERE_A) to B... (WHERE_B)" for the first file both maps
// name with different hashes; nothing when they agree.
std::optional<std::string> changed_input_file(const std::map<std::string, std::string>& a, const std::string& where_a,
                                              const std::map<std::string, std::string>& b, const std::string& where_b);

}  // namespace fp8lab
