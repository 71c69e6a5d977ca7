// The registry of study kinds: a new kind is its own file plus one entry here.
#include <functional>
#include <map>

#include "harness/study/study_kind.hpp"

namespace fp8lab {

std::unique_ptr<StudyKind> make_gemm_study();
std::unique_ptr<StudyKind> make_recompute_study();
std::unique_ptr<StudyKind> make_loss_scaling_study();
std::unique_ptr<StudyKind> make_scale_trajectory_study();
std::unique_ptr<StudyKind> make_train_study();
std::unique_ptr<StudyKind> make_formats_study();
std::unique_ptr<StudyKind> make_zero_memory_study();

namespace {
struct Entry {
  const char* name;
  std::unique_ptr<StudyKind> (*make)();
};
constexpr Entry kKinds[] = {{"gemm", make_gemm_study},
                             {"recompute", make_recompute_study},
                             {"loss_scaling", make_loss_scaling_study},
                             {"scale_trajectory", make_scale_trajectory_study},
                             {"train", make_train_study},
                             {"formats", make_formats_study},
                             {"zero_memory", make_zero_memory_study}};

// Kinds registered at run time by code outside this library (the Python package's torch_train).
std::map<std::string, std::function<std::unique_ptr<StudyKind>()>>& registered_kinds() {
  static std::map<std::string, std::function<std::unique_ptr<StudyKind>()>> kinds;
  return kinds;
}

}  // namespace

void register_study_kind(const std::string& name, std::function<std::unique_ptr<StudyKind>()> make) {
  registered_kinds()[name] = std::move(make);
}

std::unique_ptr<StudyKind> make_study_kind(const std::string& name) {
  for (const Entry& e : kKinds)
    if (name == e.name) return e.make();
  if (const auto it = registered_kinds().find(name); it != registered_kinds().end()) return it->second();
  return nullptr;
}

std::vector<std::string> study_kind_names() {
  std::vector<std::string> names;
  for (const Entry& e : kKinds) names.emplace_back(e.name);
  for (const auto& [name, make] : registered_kinds()) names.push_back(name);
  return names;
}

}  // namespace fp8lab
