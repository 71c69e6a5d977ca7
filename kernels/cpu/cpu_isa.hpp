#pragma once
// Which SIMD instruction set the CPU kernels run with, chosen at run time.
//
// The build targets a portable baseline (FP8LAB_MARCH, x86-64-v3 by default); the hot loops
// (the GEMM emulation's micro-tiles, the quantizer) are also compiled for wider targets with
// function target attributes and picked per call from what this CPU supports. Every variant
// computes the same bits: the kernels use only exact element-wise operations (no
// reassociation), so the choice changes speed, never results.
//
// FP8LAB_CPU_ISA=scalar|avx2|avx512 lowers the choice (a request above what the CPU has is
// refused), so tests and users can run and compare every path on one machine.
#include <string_view>

namespace fp8lab::cpu {

enum class CpuIsa { scalar = 0, avx2 = 1, avx512 = 2 };

const char* cpu_isa_name(CpuIsa isa);
CpuIsa parse_cpu_isa(std::string_view text);  // throws std::invalid_argument naming the choices

// What this CPU supports (AVX2 needs FMA too; AVX-512 means F, VL, BW and DQ).
CpuIsa detected_cpu_isa();

// What the kernels use: detected_cpu_isa(), lowered by FP8LAB_CPU_ISA or set_cpu_isa().
CpuIsa active_cpu_isa();

// Pins the ISA for this process (tests compare paths); throws when the CPU lacks it.
void set_cpu_isa(CpuIsa isa);

// The -march every translation unit was compiled with (FP8LAB_MARCH), e.g. "x86-64-v3".
const char* compiled_baseline_isa();

}  // namespace fp8lab::cpu

// Function attributes for the variants. flatten inlines every call in the body, so helper
// templates and codecs are compiled for the variant's target too.
#define FP8LAB_TARGET_AVX2 __attribute__((target("avx2,fma,bmi,bmi2,popcnt"), flatten))
#define FP8LAB_TARGET_AVX512 \
  __attribute__((target("avx512f,avx512vl,avx512bw,avx512dq,avx2,fma,bmi,bmi2,popcnt"), flatten))
