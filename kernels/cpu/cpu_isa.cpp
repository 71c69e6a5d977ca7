#include "kernels/cpu/cpu_isa.hpp"

#include <atomic>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace fp8lab::cpu {
namespace {

std::atomic<int> pinned{-1};  // set_cpu_isa's choice, -1 when none

void check_supported(CpuIsa isa, const std::string& origin) {
  if (isa > detected_cpu_isa())
    throw std::invalid_argument(origin + " asks for " + cpu_isa_name(isa) + " but this CPU supports at most " +
                                cpu_isa_name(detected_cpu_isa()));
}

CpuIsa from_environment() {
  const char* text = std::getenv("FP8LAB_CPU_ISA");
  if (text == nullptr || *text == '\0') return detected_cpu_isa();
  CpuIsa isa;
  try {
    isa = parse_cpu_isa(text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("FP8LAB_CPU_ISA: ") + e.what());
  }
  check_supported(isa, "FP8LAB_CPU_ISA");
  return isa;
}

}  // namespace

const char* cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::scalar: return "scalar";
    case CpuIsa::avx2: return "avx2";
    case CpuIsa::avx512: return "avx512";
  }
  return "?";
}

CpuIsa parse_cpu_isa(std::string_view text) {
  if (text == "scalar") return CpuIsa::scalar;
  if (text == "avx2") return CpuIsa::avx2;
  if (text == "avx512") return CpuIsa::avx512;
  throw std::invalid_argument("'" + std::string(text) + "' is not one of scalar, avx2, avx512");
}

CpuIsa detected_cpu_isa() {
  static const CpuIsa isa = [] {
    __builtin_cpu_init();
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    const bool avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
                        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
    return avx512 ? CpuIsa::avx512 : avx2 ? CpuIsa::avx2 : CpuIsa::scalar;
  }();
  return isa;
}

CpuIsa active_cpu_isa() {
  const int p = pinned.load(std::memory_order_relaxed);
  if (p >= 0) return static_cast<CpuIsa>(p);
  static const CpuIsa isa = from_environment();
  return isa;
}

void set_cpu_isa(CpuIsa isa) {
  check_supported(isa, "set_cpu_isa");
  pinned.store(static_cast<int>(isa), std::memory_order_relaxed);
}

const char* compiled_baseline_isa() {
#ifdef FP8LAB_BUILD_MARCH
  return FP8LAB_BUILD_MARCH[0] != '\0' ? FP8LAB_BUILD_MARCH : "compiler default";
#else
  return "unknown";
#endif
}

}  // namespace fp8lab::cpu
