#pragma once
// Host-memory entry points of the tiled WGMMA kernel (wgmma_gemm_tiled.hpp), plain and grouped,
// in the contract of gemm_cuda.hpp (operands copied in, output copied out as FP32 values, every
// device buffer through `ledger`), and the pieces the benchmarks set up the same way. The first
// kernel stays the `--backend cuda` engine until a GPU window shows this one exact and faster.
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/cuda/gemm_cuda.hpp"
#include "kernels/cuda/wgmma_gemm_tiled.hpp"
#include "kernels/grouped_gemm_layout.hpp"

namespace fp8lab::cuda {

int device_sm_count();  // of the current device

WgmmaTiledProblem wgmma_tiled_problem(const QuantizedTensor& a, const QuantizedTensor& b,
                                      const DeviceGemmOperands& operands, OutputType output, void* c);

// Throws std::invalid_argument (plan_wgmma_tiled_gemm) for what the kernel cannot run.
std::vector<float> wgmma_tiled_gemm_nt_host(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config,
                                            const cpu::GemmOptions& options, MemoryLedger& ledger);

// The grouped form's operands on the device: A and its scales as for the plain GEMM, the
// experts' codes (experts x N x K) and scale grids one after the other, block_expert as int32.
struct DeviceGroupedOperands {
  DeviceGemmOperands gemm;
  DeviceBuffer block_expert;
};
DeviceGroupedOperands upload_grouped(MemoryLedger& ledger, const QuantizedTensor& a, std::span<const QuantizedTensor> experts,
                                     std::span<const std::int32_t> block_expert);
WgmmaTiledProblem wgmma_tiled_grouped_problem(const QuantizedTensor& a, std::span<const QuantizedTensor> experts,
                                              const DeviceGroupedOperands& operands, OutputType output, void* c);

// cpu::gemm_grouped_contiguous_nt on the GPU: padding rows are 0 (the output is zeroed, the
// kernel skips their blocks). Throws std::invalid_argument as check_grouped_contiguous and
// plan_wgmma_tiled_gemm (on expert 0's B) do.
std::vector<float> wgmma_tiled_grouped_nt_host(const QuantizedTensor& a, std::span<const QuantizedTensor> experts,
                                               std::span<const std::int32_t> block_expert, const GemmConfig& config,
                                               MemoryLedger& ledger);

}  // namespace fp8lab::cuda
