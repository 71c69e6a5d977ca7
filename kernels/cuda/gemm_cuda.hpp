#pragma once
// Host-memory FP8 GEMMs on the GPU in the backend contract of kernels/cpu/gemm_fp8_nt.hpp
// (M x N FP32 values, BF16 outputs widened; or the sampled rows x cols): operands are copied
// in, the engine runs, the output is copied out. Every device buffer goes through `ledger`.
#include <vector>

#include "kernels/cpu/gemm_fp8_nt.hpp"
#include "kernels/memory_ledger.hpp"

namespace fp8lab::cuda {

// fp8lab's WGMMA kernel; throws std::invalid_argument (plan_wgmma_gemm) for what it cannot run.
std::vector<float> wgmma_gemm_nt_host(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config,
                                      const cpu::GemmOptions& options, MemoryLedger& ledger);

// cuBLASLt's block-scaled GEMM; throws std::invalid_argument (cublaslt_config_failure).
std::vector<float> cublaslt_gemm_nt_host(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config,
                                         const cpu::GemmOptions& options, MemoryLedger& ledger);

}  // namespace fp8lab::cuda
