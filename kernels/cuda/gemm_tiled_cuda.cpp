#include "kernels/cuda/gemm_tiled_cuda.hpp"

namespace fp8lab::cuda {
namespace {

template <class T>
DeviceBuffer upload_stacked(MemoryLedger& ledger, std::span<const QuantizedTensor> experts,
                            const std::vector<T> QuantizedTensor::*field) {
  std::vector<T> all;
  for (const QuantizedTensor& e : experts) all.insert(all.end(), (e.*field).begin(), (e.*field).end());
  return upload(ledger, all, MemoryCategory::weights);
}

}  // namespace

int device_sm_count() {
  int device = 0, sms = 0;
  FP8LAB_CUDA_CHECK(cudaGetDevice(&device));
  FP8LAB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

WgmmaTiledProblem wgmma_tiled_problem(const QuantizedTensor& a, const QuantizedTensor& b,
                                      const DeviceGemmOperands& operands, OutputType output, void* c) {
  WgmmaTiledProblem problem;
  problem.m = a.rows;
  problem.n = b.rows;
  problem.k = a.cols;
  problem.format = a.config.format.fp8();
  problem.a = static_cast<const std::uint8_t*>(operands.a_codes.data());
  problem.b = static_cast<const std::uint8_t*>(operands.b_codes.data());
  problem.a_scales = static_cast<const float*>(operands.a_scales.data());
  problem.b_scales = static_cast<const float*>(operands.b_scales.data());
  problem.output = output;
  problem.c = c;
  return problem;
}

std::vector<float> wgmma_tiled_gemm_nt_host(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config,
                                            const cpu::GemmOptions& options, MemoryLedger& ledger) {
  const WgmmaTiledPlan plan = plan_wgmma_tiled_gemm(a, b, config, device_sm_count());
  const DeviceGemmOperands operands = upload_for_wgmma(ledger, a, b);
  const DeviceBuffer c = ledger.allocate(gemm_output_bytes(a.rows, b.rows, config.output), MemoryCategory::other);
  WgmmaTiledLaunch(wgmma_tiled_problem(a, b, operands, config.output, c.data()), plan).launch(nullptr);
  FP8LAB_CUDA_CHECK(cudaDeviceSynchronize());
  return download_gemm_output(c, a.rows, b.rows, config.output, options);
}

DeviceGroupedOperands upload_grouped(MemoryLedger& ledger, const QuantizedTensor& a, std::span<const QuantizedTensor> experts,
                                     std::span<const std::int32_t> block_expert) {
  check_grouped_contiguous(a, experts, block_expert);
  return {{upload(ledger, a.codes, MemoryCategory::other), upload_stacked(ledger, experts, &QuantizedTensor::codes),
           upload(ledger, a.scales, MemoryCategory::other), upload_stacked(ledger, experts, &QuantizedTensor::scales)},
          upload(ledger, std::vector<std::int32_t>(block_expert.begin(), block_expert.end()), MemoryCategory::other)};
}

WgmmaTiledProblem wgmma_tiled_grouped_problem(const QuantizedTensor& a, std::span<const QuantizedTensor> experts,
                                              const DeviceGroupedOperands& operands, OutputType output, void* c) {
  WgmmaTiledProblem problem = wgmma_tiled_problem(a, experts.front(), operands.gemm, output, c);
  problem.block_expert = static_cast<const std::int32_t*>(operands.block_expert.data());
  problem.experts = static_cast<std::int64_t>(experts.size());
  problem.b_scales_per_expert = static_cast<std::int64_t>(experts.front().scales.size());
  return problem;
}

std::vector<float> wgmma_tiled_grouped_nt_host(const QuantizedTensor& a, std::span<const QuantizedTensor> experts,
                                               std::span<const std::int32_t> block_expert, const GemmConfig& config,
                                               MemoryLedger& ledger) {
  check_grouped_contiguous(a, experts, block_expert);
  const WgmmaTiledPlan plan = plan_wgmma_tiled_gemm(a, experts.front(), config, device_sm_count());
  const DeviceGroupedOperands operands = upload_grouped(ledger, a, experts, block_expert);
  const std::int64_t n = experts.front().rows;
  const DeviceBuffer c = ledger.allocate(gemm_output_bytes(a.rows, n, config.output), MemoryCategory::other);
  FP8LAB_CUDA_CHECK(cudaMemset(c.data(), 0, gemm_output_bytes(a.rows, n, config.output)));
  WgmmaTiledLaunch(wgmma_tiled_grouped_problem(a, experts, operands, config.output, c.data()), plan).launch(nullptr);
  FP8LAB_CUDA_CHECK(cudaDeviceSynchronize());
  return download_gemm_output(c, a.rows, n, config.output, {});
}

}  // namespace fp8lab::cuda
