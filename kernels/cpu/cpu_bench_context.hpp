#pragma once
// Benchmark context for the CPU kernels: which SIMD path ran and what the build targeted, so a
// ratio in a benchmark's output can be read against the machine that produced it.
#include <benchmark/benchmark.h>

#include "kernels/cpu/cpu_isa.hpp"

namespace fp8lab::bench {

inline void add_cpu_isa_context() {
  benchmark::AddCustomContext("fp8lab_cpu_isa", cpu::cpu_isa_name(cpu::active_cpu_isa()));
  benchmark::AddCustomContext("fp8lab_cpu_isa_detected", cpu::cpu_isa_name(cpu::detected_cpu_isa()));
  benchmark::AddCustomContext("fp8lab_build_march", cpu::compiled_baseline_isa());
}

}  // namespace fp8lab::bench
