#include "harness/study/study_spec.hpp"

#include <algorithm>
#include <fstream>
#include <functional>
#include <map>
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
T get_setting(const StudySpec& spec, const std::string& dotted, T fallback, const char* type_name,
              std::set<std::string>& requested) {
  requested.insert(dotted);
  const toml::node_view<const toml::node> node = spec.table.at_path(dotted);
  if (!node) return fallback;
  if (const auto value = node.value<T>()) return *value;
  throw spec.error(dotted, std::string("expected ") + type_name, &node.node()->source());
}

}  // namespace

std::int64_t StudySpec::get_int(const std::string& dotted, std::int64_t fallback) const {
  return get_setting<std::int64_t>(*this, dotted, fallback, "an integer", requested_);
}
double StudySpec::get_double(const std::string& dotted, double fallback) const {
  return get_setting<double>(*this, dotted, fallback, "a number", requested_);
}
std::string StudySpec::get_string(const std::string& dotted, const std::string& fallback) const {
  return get_setting<std::string>(*this, dotted, fallback, "a string", requested_);
}
bool StudySpec::get_bool(const std::string& dotted, bool fallback) const {
  return get_setting<bool>(*this, dotted, fallback, "true or false", requested_);
}

namespace {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

// " (did you mean 'X'?)" for the closest candidate within a few edits, else "".
std::string suggestion(std::string_view word, const std::set<std::string>& candidates) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const std::string& c : candidates)
    if (const std::size_t d = edit_distance(word, c); d < best_distance) {
      best_distance = d;
      best = c;
    }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

std::string joined(const std::set<std::string>& names) {
  std::string s;
  for (const std::string& n : names) s += (s.empty() ? "" : ", ") + n;
  return s;
}

}  // namespace

void StudySpec::check_unknown_keys() const {
  // Known tables and, per table path, the keys asked for in it.
  std::map<std::string, std::set<std::string>> known;
  for (const std::string& dotted : requested_) {
    const std::size_t dot = dotted.rfind('.');
    if (dot != std::string::npos) known[dotted.substr(0, dot)].insert(dotted.substr(dot + 1));
  }
  std::set<std::string> tables = {"axes"};
  for (const auto& [t, keys] : known) tables.insert(t.substr(0, t.find('.')));
  // Depth-first over the tables (toml++ keeps keys sorted).
  const std::function<void(const toml::table&, const std::string&)> walk = [&](const toml::table& t,
                                                                               const std::string& prefix) {
    for (const auto& [key, node] : t) {
      const std::string key_name(key.str());
      const std::string dotted = prefix.empty() ? key_name : prefix + "." + key_name;
      if (prefix.empty() && key_name == "axes") continue;  // axis names are checked against the study kind
      if (prefix.empty() && node.is_table() && !tables.contains(key_name))
        throw error(key_name, "unknown table [" + key_name + "]" + suggestion(key_name, tables) + "; known: " + joined(tables),
                    &key.source());
      if (const toml::table* inner = node.as_table(); inner && known.contains(dotted)) {
        walk(*inner, dotted);
        continue;
      }
      const auto it = known.find(prefix);
      if (it == known.end() || !it->second.contains(key_name))
        throw error(dotted,
                    "unknown key" + (it == known.end() ? std::string() : suggestion(key_name, it->second) + "; known in [" +
                                                                             prefix + "]: " + joined(it->second)),
                    &key.source());
    }
  };
  walk(table, "");
}

StudySpec load_study_spec(const std::filesystem::path& file) {
  std::error_code ignored;
  if (std::filesystem::is_directory(file, ignored)) throw SpecError(file.string() + ": is a directory, not a study spec");
  std::ifstream in(file);
  if (!in) throw SpecError(file.string() + ": cannot open the study spec");
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parse_study_spec(buffer.str(), file);
}

StudySpec parse_study_spec(std::string text, const std::filesystem::path& file) {
  StudySpec spec;
  spec.file = file;
  spec.text = std::move(text);
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
