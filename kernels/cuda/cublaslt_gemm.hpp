#pragma once
// One small wrapper around cuBLASLt for the three GEMMs the GPU GEMM benchmark times, all
// computing C[M, N] = A[M, K] * B[N, K]^T with A and B K-major and C row-major (DeepGEMM's NT):
//   block_scaled  FP8 codes, A scales VEC128_32F, B scales BLK128x128_32F (or VEC128_32F)
//   per_tensor    FP8 codes, one FP32 scale each
//   bf16          BF16 operands (the high-precision baseline)
// cuBLASLt is column-major and Hopper FP8 is TN only, so the call is C^T = B * A^T:
// cuBLASLt's A is our B (transposed), its B is our A; its M is our N. The scale layouts
// follow from that (kernels/scale_layouts.hpp): VEC128 scales rows-fastest for both, BLK128x128
// K-fastest with the padded stride.
//
// Preconditions are checked before cuBLASLt is asked (kernels/gpu_gemm_preconditions.hpp);
// the workspace comes from the memory ledger, so peak VRAM includes it.
#include <cublasLt.h>

#include <cstdint>
#include <string>

#include "kernels/gemm_config.hpp"
#include "kernels/gpu_gemm_preconditions.hpp"
#include "kernels/memory_ledger.hpp"

namespace fp8lab::cuda {

struct CublasLtProblem {
  CublasLtMode mode = CublasLtMode::block_scaled;
  std::int64_t m = 0, n = 0, k = 0;
  Fp8Format a_format = Fp8Format::e4m3, b_format = Fp8Format::e4m3;  // FP8 modes
  bool b_vec128 = false;  // block_scaled: B scaled per tile:1x128 instead of block:128x128
  OutputType output = OutputType::fp32;
  // Device pointers. a: M x K, b: N x K (FP8 codes, or __nv_bfloat16 for bf16); c: M x N.
  const void* a = nullptr;
  const void* b = nullptr;
  const float* a_scales = nullptr;  // unused for bf16
  const float* b_scales = nullptr;
  void* c = nullptr;
};

// A handle, a workspace from the ledger, and the version it runs. One per thread.
class CublasLt {
 public:
  static constexpr std::size_t kDefaultWorkspaceBytes = 32u << 20;
  explicit CublasLt(MemoryLedger& ledger, std::size_t workspace_bytes = kDefaultWorkspaceBytes);
  ~CublasLt();
  CublasLt(const CublasLt&) = delete;
  CublasLt& operator=(const CublasLt&) = delete;
  cublasLtHandle_t handle() const { return handle_; }
  void* workspace() const { return workspace_.data(); }
  std::size_t workspace_bytes() const { return workspace_.bytes(); }

 private:
  cublasLtHandle_t handle_ = nullptr;
  DeviceBuffer workspace_;
};

std::string cublaslt_version_text();  // e.g. "13.1.0 (cublasLtGetVersion 130100)"

// One prepared GEMM: descriptors, layouts and the heuristic's algorithm, made once, so a
// benchmark times launch() alone. Throws std::invalid_argument for a failed precondition
// (before any cuBLASLt call) and std::runtime_error naming the failed cuBLASLt call.
class CublasLtMatmul {
 public:
  CublasLtMatmul(const CublasLt& lt, const CublasLtProblem& problem);
  ~CublasLtMatmul();
  CublasLtMatmul(const CublasLtMatmul&) = delete;
  CublasLtMatmul& operator=(const CublasLtMatmul&) = delete;
  void launch(cudaStream_t stream) const;

 private:
  void prepare();
  void release() noexcept;
  const CublasLt& lt_;
  CublasLtProblem problem_;
  cublasLtMatmulDesc_t desc_ = nullptr;
  cublasLtMatrixLayout_t layout_a_ = nullptr, layout_b_ = nullptr, layout_c_ = nullptr;
  cublasLtMatmulAlgo_t algo_{};
};

}  // namespace fp8lab::cuda
