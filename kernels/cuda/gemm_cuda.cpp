#include "kernels/cuda/gemm_cuda.hpp"

#include <stdexcept>

#include "kernels/scale_layouts.hpp"

namespace fp8lab::cuda {
namespace {

bool b_per_vec128(const QuantizedTensor& b) { return b.config.granularity.kind == Granularity::Kind::tile; }

}  // namespace

std::size_t gemm_output_bytes(std::int64_t m, std::int64_t n, OutputType output) {
  return static_cast<std::size_t>(m * n) * (output == OutputType::bf16 ? 2 : 4);
}

// The M x N output (FP32 or BF16 on the device) as FP32 host values, all or the sampled subset.
std::vector<float> download_gemm_output(const DeviceBuffer& c, std::int64_t m, std::int64_t n, OutputType output,
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

DeviceGemmOperands upload_for_wgmma(MemoryLedger& ledger, const QuantizedTensor& a, const QuantizedTensor& b) {
  return {upload(ledger, a.codes, MemoryCategory::other), upload(ledger, b.codes, MemoryCategory::weights),
          upload(ledger, a.scales, MemoryCategory::other), upload(ledger, b.scales, MemoryCategory::weights)};
}

DeviceGemmOperands upload_for_cublaslt(MemoryLedger& ledger, const QuantizedTensor& a, const QuantizedTensor& b) {
  return {upload(ledger, a.codes, MemoryCategory::other), upload(ledger, b.codes, MemoryCategory::weights),
          upload(ledger, vec128_scales_rows_fastest(a), MemoryCategory::other),
          upload(ledger, b_per_vec128(b) ? vec128_scales_rows_fastest(b) : blk128x128_scales_k_fastest(b),
                 MemoryCategory::weights)};
}

WgmmaGemmProblem wgmma_problem(const QuantizedTensor& a, const QuantizedTensor& b, const DeviceGemmOperands& operands,
                               OutputType output, void* c) {
  WgmmaGemmProblem problem;
  problem.m = a.rows;
  problem.n = b.rows;
  problem.k = a.cols;
  problem.format = a.config.format.fp8();
  problem.a = static_cast<const std::uint8_t*>(operands.a_codes.data());
  problem.b = static_cast<const std::uint8_t*>(operands.b_codes.data());
  problem.a_scales = {static_cast<const float*>(operands.a_scales.data()), a.tile_rows, a.tile_cols, a.scale_cols};
  problem.b_scales = {static_cast<const float*>(operands.b_scales.data()), b.tile_rows, b.tile_cols, b.scale_cols};
  problem.output = output;
  problem.c = c;
  return problem;
}

CublasLtProblem cublaslt_block_scaled_problem(const QuantizedTensor& a, const QuantizedTensor& b,
                                              const DeviceGemmOperands& operands, OutputType output, void* c) {
  CublasLtProblem problem;
  problem.mode = CublasLtMode::block_scaled;
  problem.m = a.rows;
  problem.n = b.rows;
  problem.k = a.cols;
  problem.a_format = a.config.format.fp8();
  problem.b_format = b.config.format.fp8();
  problem.b_vec128 = b_per_vec128(b);
  problem.output = output;
  problem.a = operands.a_codes.data();
  problem.b = operands.b_codes.data();
  problem.a_scales = static_cast<const float*>(operands.a_scales.data());
  problem.b_scales = static_cast<const float*>(operands.b_scales.data());
  problem.c = c;
  return problem;
}

std::vector<float> wgmma_gemm_nt_host(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config,
                                      const cpu::GemmOptions& options, MemoryLedger& ledger) {
  const WgmmaLaunchPlan plan = plan_wgmma_gemm(a, b, config);
  const DeviceGemmOperands operands = upload_for_wgmma(ledger, a, b);
  const DeviceBuffer c = ledger.allocate(gemm_output_bytes(a.rows, b.rows, config.output), MemoryCategory::other);
  wgmma_gemm_nt(wgmma_problem(a, b, operands, config.output, c.data()), plan, nullptr);
  FP8LAB_CUDA_CHECK(cudaDeviceSynchronize());
  return download_gemm_output(c, a.rows, b.rows, config.output, options);
}

std::vector<float> cublaslt_gemm_nt_host(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config,
                                         const cpu::GemmOptions& options, MemoryLedger& ledger) {
  if (std::string why = cublaslt_config_failure(a, b, config); !why.empty()) throw std::invalid_argument(why);
  const DeviceGemmOperands operands = upload_for_cublaslt(ledger, a, b);
  const DeviceBuffer c = ledger.allocate(gemm_output_bytes(a.rows, b.rows, config.output), MemoryCategory::other);
  const CublasLt lt(ledger);
  const CublasLtMatmul matmul(lt, cublaslt_block_scaled_problem(a, b, operands, config.output, c.data()));
  matmul.launch(nullptr);
  FP8LAB_CUDA_CHECK(cudaDeviceSynchronize());
  return download_gemm_output(c, a.rows, b.rows, config.output, options);
}

}  // namespace fp8lab::cuda
