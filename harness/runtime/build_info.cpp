#include "harness/runtime/build_info.hpp"

#include <Eigen/Core>

#include "harness/results/results_file.hpp"
#include "kernels/cpu/cpu_isa.hpp"

// Set by harness/CMakeLists.txt on this file only (a flag change rebuilds one object).
#ifndef FP8LAB_BUILD_FLAGS
#define FP8LAB_BUILD_FLAGS "unknown"
#endif
#ifndef FP8LAB_OPENMP_VERSION
#define FP8LAB_OPENMP_VERSION "unknown"
#endif

namespace fp8lab {
namespace {

std::string& recorded_command_line() {
  static std::string text = "fp8lab";
  return text;
}

std::string quoted(const std::string& arg) {
  if (!arg.empty() && arg.find_first_of(" \t\n'\"\\$`*?;&|<>()") == std::string::npos) return arg;
  std::string q = "'";
  for (char c : arg) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

std::map<std::string, std::string> build_provenance() {
  return {{"compiler",
#if defined(__clang__)
           "clang " __clang_version__
#elif defined(__GNUC__)
           "GCC " __VERSION__
#else
           "unknown"
#endif
          },
          {"compiler_flags", FP8LAB_BUILD_FLAGS},
          {"build_march", cpu::compiled_baseline_isa()},
          {"cpu_isa", cpu::cpu_isa_name(cpu::active_cpu_isa())},
          {"eigen_version", std::to_string(EIGEN_WORLD_VERSION) + "." + std::to_string(EIGEN_MAJOR_VERSION) + "." +
                                std::to_string(EIGEN_MINOR_VERSION)},
          {"openmp_version", FP8LAB_OPENMP_VERSION},
          {"hdf5_version", hdf5_library_version()}};
}

void record_command_line(int argc, char** argv) {
  std::string text;
  for (int i = 0; i < argc; ++i) text += (i ? " " : "") + quoted(i == 0 ? std::string("fp8lab") : std::string(argv[i]));
  recorded_command_line() = text;
}

const std::string& command_line() { return recorded_command_line(); }

}  // namespace fp8lab
