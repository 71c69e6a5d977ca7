#include "harness/study/study_spec.hpp"

#include <fstream>
#include <sstream>

namespace fp8lab {

SpecError StudySpec::error(const std::string& field, const std::string& message, const toml::source_region* where) const {
  std::string position = file.string();
  if (where && where->begin.line > 0)
    position += ":" + std::to_string(where->begin.line) + ":" + std::to_string(where->begin.column);
  return SpecError(position + ": field '" + field + "': " + message);
}

namespace {

template <class T>
T get_setting(const StudySpec& spec, const std::string& dotted, T fallback, const char* type_name) {
  const toml::node_view<const toml::node> node = spec.table.at_path(dotted);
  if (!node) return fallback;
  if (const auto value = node.value<T>()) return *value;
  throw spec.error(dotted, std::string("expected ") + type_name, &node.node()->source());
}

}  // namespace

std::int64_t StudySpec::get_int(const std::string& dotted, std::int64_t fallback) const {
  return get_setting<std::int64_t>(*this, dotted, fallback, "an integer");
}
double StudySpec::get_double(const std::string& dotted, double fallback) const {
  return get_setting<double>(*this, dotted, fallback, "a number");
}
std::string StudySpec::get_string(const std::string& dotted, const std::string& fallback) const {
  return get_setting<std::string>(*this, dotted, fallback, "a string");
}

StudySpec load_study_spec(const std::filesystem::path& file) {
  StudySpec spec;
  spec.file = file;
  std::ifstream in(file);
  if (!in) throw SpecError(file.string() + ": cannot open the study spec");
  std::stringstream buffer;
  buffer << in.rdbuf();
  spec.text = buffer.str();
  try {
    spec.table = toml::parse(spec.text, file.string());
  } catch (const toml::parse_error& e) {
    throw SpecError(file.string() + ":" + std::to_string(e.source().begin.line) + ":" +
                    std::to_string(e.source().begin.column) + ": malformed TOML: " + std::string(e.description()));
  }
  const toml::table* study = spec.table["study"].as_table();
  if (!study) throw spec.error("study", "missing [study] table with name and kind");
  spec.name = spec.get_string("study.name", "");
  spec.kind = spec.get_string("study.kind", "");
  spec.description = spec.get_string("study.description", "");
  if (spec.name.empty()) throw spec.error("study.name", "missing or empty", &study->source());
  if (spec.name.find_first_of("/\\ ") != std::string::npos)
    throw spec.error("study.name", "must not contain '/', '\\' or spaces (it names the results file)");
  if (spec.kind.empty()) throw spec.error("study.kind", "missing or empty", &study->source());
  if (const toml::table* axes = spec.table["axes"].as_table()) {
    for (const auto& [key, node] : *axes) {
      Axis axis;
      axis.name = std::string(key.str());
      const toml::array* values = node.as_array();
      if (!values || values->empty())
        throw spec.error("axes." + axis.name, "must be a non-empty array of values", &node.source());
      for (const toml::node& v : *values) {
        if (const auto s = v.value<std::string>()) axis.values.push_back(*s);
        else if (const auto i = v.value<std::int64_t>()) axis.values.push_back(std::to_string(*i));
        else throw spec.error("axes." + axis.name, "values must be strings or integers", &v.source());
        axis.positions.push_back(v.source());
      }
      spec.axes.push_back(std::move(axis));
    }
  }
  return spec;
}

}  // namespace fp8lab
