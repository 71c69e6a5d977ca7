#pragma once
// Eigen's FP32 GEMM compiled for AVX-512 (x86-64-v3 plus AVX-512 F, VL, BW and DQ, what
// cpu_isa.cpp checks for): the benchmark baseline on AVX-512 CPUs.
//
// Eigen picks its SIMD at compile time, so a portable (x86-64-v3) build gives it AVX2 on every
// machine, and an emulation-vs-Eigen ratio measured on an AVX-512 machine would compare against
// a handicapped baseline. This library holds a second copy of Eigen, compiled for AVX-512; the
// GEMM benchmark calls it when the CPU (and FP8LAB_CPU_ISA) allows AVX-512.
//
// Why a shared library of its own (eigen_sgemm_avx512.cpp): the same Eigen and libstdc++
// templates compiled for two targets in one link would be merged by the linker (one copy
// chosen for both), which could run AVX-512 code on an AVX2 CPU. Here the copy is private: a
// version script exports only these two functions (local: * binds every other symbol inside
// the library, libstdc++'s default-visibility std:: instantiations included), so nothing
// inside can be chosen for, or replaced by, the rest of the program; Eigen's namespace is also
// renamed, so its symbols are distinct anyway. The library is loaded on every machine (the
// benchmark links it), so it must run no code of its own at load time: it has no static
// initializers (Eigen/Core defines none outside debug builds; `readelf -x .init_array` on it
// shows the one frame_dummy entry every shared object has).

extern "C" {

// C = A B^T: A row-major m x k, B row-major n x k, C row-major m x n (Eigen with OpenMP, all
// threads). Call only when the CPU has AVX-512 F, VL, BW and DQ.
void fp8lab_eigen_sgemm_nt_avx512(const float* a, const float* b, float* c, long m, long n, long k);

// Eigen::SimdInstructionSetsInUse() of that copy, e.g. "AVX512, FMA, AVX2, ...".
const char* fp8lab_eigen_simd_avx512();
}
