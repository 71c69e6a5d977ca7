#pragma once
// fp8lab's own block-scaled FP8 GEMM for sm_90a: C[M, N] = A[M, K] * B[N, K]^T with the
// promotion arithmetic of DESIGN.md section 2, so that it equals the CPU backend's `hopper`
// emulation bit for bit:
//   per N_C elements of K, a tensor-core partial p (wgmma m64n128k32, started from 0 on the
//   unscaled FP8 codes), then s = fl32(s_a * s_b); acc = fma32(p, s, acc).
// Structure (DeepGEMM's, written here): TMA loads of 128 x 128-byte A and B tiles into a
// multi-stage shared-memory ring (128-byte swizzle), one producer warpgroup and two consumer
// warpgroups (64 rows of the 128 x 128 output tile each), a persistent grid of one CTA per SM.
// Which shapes and scales it takes: kernels/gpu_gemm_preconditions.hpp (plan_wgmma_gemm).
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "kernels/gemm_config.hpp"
#include "kernels/gpu_gemm_preconditions.hpp"

namespace fp8lab::cuda {

// One operand's scale grid on the device, in QuantizedTensor's own row-major layout: the
// scale of element (r, k) is scales[(r / tile_rows) * scale_cols + k / tile_cols].
struct DeviceScales {
  const float* scales = nullptr;
  std::int64_t tile_rows = 1, tile_cols = 1, scale_cols = 1;
};

struct WgmmaGemmProblem {
  std::int64_t m = 0, n = 0, k = 0;
  Fp8Format format = Fp8Format::e4m3;
  const std::uint8_t* a = nullptr;  // M x K codes, row-major (K-major)
  const std::uint8_t* b = nullptr;  // N x K codes
  DeviceScales a_scales, b_scales;
  OutputType output = OutputType::fp32;
  void* c = nullptr;  // M x N, float or __nv_bfloat16, row-major
};

// One GEMM made ready to launch: both tensor maps encoded (cuTensorMapEncodeTiled), the
// kernel's dynamic shared-memory limit raised (cudaFuncSetAttribute) and the persistent grid
// sized from the device's SM count, so launch() does nothing but launch: a benchmark prepares
// once and times launch() alone. plan comes from plan_wgmma_gemm on the same operands; the
// problem's device buffers must outlive every launch. Cheap to copy (shared, immutable).
class WgmmaGemmLaunch {
 public:
  WgmmaGemmLaunch(const WgmmaGemmProblem& problem, const WgmmaLaunchPlan& plan);
  void launch(cudaStream_t stream) const;  // asynchronous on `stream`
  struct Prepared;  // defined in wgmma_gemm.cu

 private:
  std::shared_ptr<const Prepared> prepared_;
};

// Prepares and launches on `stream` (asynchronous): WgmmaGemmLaunch(problem, plan).launch(stream).
void wgmma_gemm_nt(const WgmmaGemmProblem& problem, const WgmmaLaunchPlan& plan, cudaStream_t stream);

// The kernel's shared memory per CTA and pipeline depth, for the resource report.
struct WgmmaKernelResources {
  int stages = 0;
  std::size_t shared_bytes = 0;
  int threads = 0;
};
WgmmaKernelResources wgmma_kernel_resources();

}  // namespace fp8lab::cuda
