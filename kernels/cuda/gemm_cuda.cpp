#include "kernels/cuda/gemm_cuda.hpp"

#include <cuda_bf16.h>

#include <cstring>
#include <stdexcept>

#include "kernels/cuda/cublaslt_gemm.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/wgmma_gemm.hpp"
#include "kernels/scale_layouts.hpp"

namespace fp8lab::cuda {
namespace {

template <class T>
DeviceBuffer upload(MemoryLedger& ledger, const std::vector<T>& host, MemoryCategory category) {
  DeviceBuffer buffer = ledger.allocate(host.size() * sizeof(T), category);
  FP8LAB_CUDA_CHECK(cudaMemcpy(buffer.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return buffer;
}

// The M x N output (FP32 or BF16 on the device) as FP32 host values, all or the sampled subset.
std::vector<float> download_output(const DeviceBuffer& c, std::int64_t m, std::int64_t n, OutputType output,
                                   const cpu::GemmOptions& options) {
  const auto count = static_cast<std::size_t>(m * n);
  std::vector<float> full(count);
  if (output == OutputType::bf16) {
    std::vector<std::uint16_t> bits(count);
    FP8LAB_CUDA_CHECK(cudaMemcpy(bits.data(), c.data(), count * sizeof(std::uint16_t), cudaMemcpyDeviceToHost));
    for (std::size_t i = 0; i < count; ++i) full[i] = float_from_bits(std::uint32_t{bits[i]} << 16);
  } else {
    FP8LAB_CUDA_CHECK(cudaMemcpy(full.data(), c.data(), count * sizeof(float), cudaMemcpyDeviceToHost));
  }
  if (options.rows.empty() && options.cols.empty()) return full;
  std::vector<std::int64_t> rows = options.rows, cols = options.cols;
  if (rows.empty()) for (std::int64_t r = 0; r < m; ++r) rows.push_back(r);
  if (cols.empty()) for (std::int64_t j = 0; j < n; ++j) cols.push_back(j);
  std::vector<float> sampled;
  sampled.reserve(rows.size() * cols.size());
  for (std::int64_t r : rows)
    for (std::int64_t j : cols) sampled.push_back(full[static_cast<std::size_t>(r * n + j)]);
  return sampled;
}

std::size_t output_bytes(std::int64_t m, std::int64_t n, OutputType output) {
  return static_cast<std::size_t>(m * n) * (output == OutputType::bf16 ? 2 : 4);
}

}  // namespace

std::vector<float> wgmma_gemm_nt_host(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config,
                                      const cpu::GemmOptions& options, MemoryLedger& ledger) {
  const WgmmaLaunchPlan plan = plan_wgmma_gemm(a, b, config);
  const DeviceBuffer a_codes = upload(ledger, a.codes, MemoryCategory::other);
  const DeviceBuffer b_codes = upload(ledger, b.codes, MemoryCategory::weights);
  const DeviceBuffer a_scales = upload(ledger, a.scales, MemoryCategory::other);
  const DeviceBuffer b_scales = upload(ledger, b.scales, MemoryCategory::weights);
  const DeviceBuffer c = ledger.allocate(output_bytes(a.rows, b.rows, config.output), MemoryCategory::other);
  WgmmaGemmProblem problem;
  problem.m = a.rows;
  problem.n = b.rows;
  problem.k = a.cols;
  problem.format = a.config.format;
  problem.a = static_cast<const std::uint8_t*>(a_codes.data());
  problem.b = static_cast<const std::uint8_t*>(b_codes.data());
  problem.a_scales = {static_cast<const float*>(a_scales.data()), a.tile_rows, a.tile_cols, a.scale_cols};
  problem.b_scales = {static_cast<const float*>(b_scales.data()), b.tile_rows, b.tile_cols, b.scale_cols};
  problem.output = config.output;
  problem.c = c.data();
  wgmma_gemm_nt(problem, plan, nullptr);
  FP8LAB_CUDA_CHECK(cudaDeviceSynchronize());
  return download_output(c, a.rows, b.rows, config.output, options);
}

std::vector<float> cublaslt_gemm_nt_host(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config,
                                         const cpu::GemmOptions& options, MemoryLedger& ledger) {
  if (std::string why = cublaslt_config_failure(a, b, config); !why.empty()) throw std::invalid_argument(why);
  const bool b_vec128 = b.config.granularity.kind == Granularity::Kind::tile;
  const DeviceBuffer a_codes = upload(ledger, a.codes, MemoryCategory::other);
  const DeviceBuffer b_codes = upload(ledger, b.codes, MemoryCategory::weights);
  const DeviceBuffer a_scales = upload(ledger, vec128_scales_rows_fastest(a), MemoryCategory::other);
  const DeviceBuffer b_scales =
      upload(ledger, b_vec128 ? vec128_scales_rows_fastest(b) : blk128x128_scales_k_fastest(b), MemoryCategory::weights);
  const DeviceBuffer c = ledger.allocate(output_bytes(a.rows, b.rows, config.output), MemoryCategory::other);
  CublasLtProblem problem;
  problem.mode = CublasLtMode::block_scaled;
  problem.m = a.rows;
  problem.n = b.rows;
  problem.k = a.cols;
  problem.a_format = a.config.format;
  problem.b_format = b.config.format;
  problem.b_vec128 = b_vec128;
  problem.output = config.output;
  problem.a = a_codes.data();
  problem.b = b_codes.data();
  problem.a_scales = static_cast<const float*>(a_scales.data());
  problem.b_scales = static_cast<const float*>(b_scales.data());
  problem.c = c.data();
  const CublasLt lt(ledger);
  const CublasLtMatmul matmul(lt, problem);
  matmul.launch(nullptr);
  FP8LAB_CUDA_CHECK(cudaDeviceSynchronize());
  return download_output(c, a.rows, b.rows, config.output, options);
}

}  // namespace fp8lab::cuda
