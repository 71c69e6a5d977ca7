#pragma once
// Host-memory FP8 GEMMs on the GPU in the backend contract of kernels/cpu/gemm_fp8_nt.hpp
// (M x N FP32 values, BF16 outputs widened; or the sampled rows x cols): operands are copied
// in, the engine runs, the output is copied out. Every device buffer goes through `ledger`.
// The pieces (operand upload in an engine's scale layout, the engine's problem) are public so
// that the benchmarks set up exactly what the backend runs.
#include <vector>

#include "kernels/cpu/gemm_fp8_nt.hpp"
#include "kernels/cuda/cublaslt_gemm.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/wgmma_gemm.hpp"
#include "kernels/memory_ledger.hpp"

namespace fp8lab::cuda {

template <class T>
DeviceBuffer upload(MemoryLedger& ledger, const std::vector<T>& host, MemoryCategory category) {
  DeviceBuffer buffer = ledger.allocate(host.size() * sizeof(T), category);
  FP8LAB_CUDA_CHECK(cudaMemcpy(buffer.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return buffer;
}

// A GEMM's quantized operands on the device, scales in the layout one engine reads.
struct DeviceGemmOperands {
  DeviceBuffer a_codes, b_codes, a_scales, b_scales;
};
// QuantizedTensor's own row-major scale grids (the WGMMA kernel).
DeviceGemmOperands upload_for_wgmma(MemoryLedger& ledger, const QuantizedTensor& a, const QuantizedTensor& b);
// VEC128 for A; BLK128x128 for B, or VEC128 when B is quantized per tile:1x128 (cuBLASLt).
DeviceGemmOperands upload_for_cublaslt(MemoryLedger& ledger, const QuantizedTensor& a, const QuantizedTensor& b);

// The M x N output (FP32 or BF16 on the device) as FP32 host values, all or options' sampled subset.
std::vector<float> download_gemm_output(const DeviceBuffer& c, std::int64_t m, std::int64_t n, OutputType output,
                                        const cpu::GemmOptions& options);
std::size_t gemm_output_bytes(std::int64_t m, std::int64_t n, OutputType output);

WgmmaGemmProblem wgmma_problem(const QuantizedTensor& a, const QuantizedTensor& b, const DeviceGemmOperands& operands,
                               OutputType output, void* c);
CublasLtProblem cublaslt_block_scaled_problem(const QuantizedTensor& a, const QuantizedTensor& b,
                                              const DeviceGemmOperands& operands, OutputType output, void* c);

// fp8lab's WGMMA kernel; throws std::invalid_argument (plan_wgmma_gemm) for what it cannot run.
std::vector<float> wgmma_gemm_nt_host(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config,
                                      const cpu::GemmOptions& options, MemoryLedger& ledger);

// cuBLASLt's block-scaled GEMM; throws std::invalid_argument (cublaslt_config_failure).
std::vector<float> cublaslt_gemm_nt_host(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config,
                                         const cpu::GemmOptions& options, MemoryLedger& ledger);

}  // namespace fp8lab::cuda
