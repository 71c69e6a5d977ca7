// The AVX-512 copy of Eigen's FP32 GEMM (eigen_sgemm_avx512.hpp says why it exists and why it
// is a shared library with one private copy of Eigen).
//
// Compiled for AVX-512 (kernels/CMakeLists.txt) with hidden visibility; eigen_sgemm_avx512.map
// exports the two functions below and nothing else. Renaming the namespace keeps every Eigen
// symbol here distinct from the program's own Eigen. (Only the CPU benchmark links this
// library; the GPU bundle does not carry it.)
#define Eigen fp8lab_eigen_avx512
#include <Eigen/Core>

#include "kernels/cpu/eigen_sgemm_avx512.hpp"

namespace {
// Row-major operands, as the benchmark's tensors are stored.
using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
}  // namespace

extern "C" __attribute__((visibility("default"))) void fp8lab_eigen_sgemm_nt_avx512(const float* a, const float* b,
                                                                                     float* c, long m, long n, long k) {
  const Eigen::Map<const RowMajor> ma(a, m, k), mb(b, n, k);
  Eigen::Map<RowMajor> mc(c, m, n);
  mc.noalias() = ma * mb.transpose();
}

extern "C" __attribute__((visibility("default"))) const char* fp8lab_eigen_simd_avx512() {
  return Eigen::SimdInstructionSetsInUse();
}
