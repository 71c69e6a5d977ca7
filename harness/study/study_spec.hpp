#pragma once
// A study as a TOML file:
//   [study]   name, kind (which StudyKind runs it), description
//   [axes]    axis = [values...]  (strings or integers); the grid is their product
//   any other tables: settings of the study kind (e.g. [operands], [sampling])
// Every error names the file, the field and, where TOML knows it, line and column.
#include <cstdint>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>
#include <toml++/toml.h>
#include <vector>

namespace fp8lab {

class SpecError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct Axis {
  std::string name;
  std::vector<std::string> values;
  std::vector<toml::source_region> positions;  // of each value, for errors
};

struct StudySpec {
  std::filesystem::path file;
  std::string text;  // the file as read: provenance
  std::string name, kind, description;
  std::vector<Axis> axes;  // in file order
  toml::table table;

  // "FILE:LINE:COL: field 'F': MESSAGE" (position omitted when unknown).
  SpecError error(const std::string& field, const std::string& message, const toml::source_region* where = nullptr) const;
  // Settings with defaults; a present value of the wrong type is an error naming the field.
  std::int64_t get_int(const std::string& dotted, std::int64_t fallback) const;
  double get_double(const std::string& dotted, double fallback) const;
  std::string get_string(const std::string& dotted, const std::string& fallback) const;
  bool get_bool(const std::string& dotted, bool fallback) const;

  // After the study kind has read its settings: every key outside [axes] must be one that was
  // asked for, else SpecError "FILE:LINE:COL: field 'operands.token': unknown key (did you
  // mean 'tokens'?)"; a table nobody asked for is named as an unknown table.
  void check_unknown_keys() const;

 private:
  mutable std::set<std::string> requested_;  // every dotted key a get_* asked for
};

// f(), with an std::invalid_argument whose message starts with its field ("lr: must be ...")
// rethrown as the SpecError of prefix + that field ("training.lr"): how settings checked outside
// the spec reader (a config's validate()) still name the file and the field.
template <class F>
void with_field_errors(const StudySpec& spec, const std::string& prefix, F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    throw spec.error(prefix + what.substr(0, what.find(':')), what);
  }
}

StudySpec load_study_spec(const std::filesystem::path& file);
// The same from the file's text (`file` names it in errors, and [tensors] paths are relative
// to its folder): what the fuzz target drives.
StudySpec parse_study_spec(std::string text, const std::filesystem::path& file);

}  // namespace fp8lab
