// The tiled WGMMA kernel (wgmma_gemm_tiled.hpp) against the CPU `hopper` emulation with the same
// N_C, bit for bit, at every width it is built with (the plan's choice overridden, so each
// instance runs): tails in M, N and K, tiles that cross a B block boundary (widths 160 and 192:
// the per-slab scale selection), more tiles than SMs (the persistent walk over rasterization
// groups), FP32 and BF16 outputs (BF16 through the TMA-store epilogue), every scale layout it
// takes; an exact control (codes in {0, +-1, +-2}) that no accumulation detail can change; the
// grouped form against cpu::gemm_grouped_contiguous_nt. Findings: `tiled wgmma vs cpu hopper`.
#include <catch2/catch.hpp>

#include <random>
#include <string>

#include "harness/metrics/error_metrics.hpp"
#include "kernels/cpu/gemm_fp8_nt.hpp"
#include "kernels/cpu/gemm_grouped_contiguous.hpp"
#include "kernels/cuda/cuda_allocator.hpp"
#include "kernels/cuda/gemm_tiled_cuda.hpp"
#include "tests/gpu/gpu_findings.hpp"
#include "tests/support/gemm_operands.hpp"

using namespace fp8lab;

namespace {

struct Case {
  std::int64_t m, n, k;
  const char* a_granularity;
  const char* b_granularity;
  const char* promotion;
};

// The kernel at width `block_n` (0: the plan's own choice) on host operands.
std::vector<float> run_tiled(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config, int block_n) {
  cuda::CudaAllocator allocator;
  MemoryLedger ledger(&allocator);
  WgmmaTiledPlan plan = plan_wgmma_tiled_gemm(a, b, config, cuda::device_sm_count());
  if (block_n != 0) plan.block_n = block_n;
  const cuda::DeviceGemmOperands operands = cuda::upload_for_wgmma(ledger, a, b);
  const DeviceBuffer c = ledger.allocate(cuda::gemm_output_bytes(a.rows, b.rows, config.output), MemoryCategory::other);
  FP8LAB_CUDA_CHECK(cudaMemset(c.data(), 0xFF, cuda::gemm_output_bytes(a.rows, b.rows, config.output)));  // NaN poison
  cuda::WgmmaTiledLaunch(cuda::wgmma_tiled_problem(a, b, operands, config.output, c.data()), plan).launch(nullptr);
  FP8LAB_CUDA_CHECK(cudaDeviceSynchronize());
  return cuda::download_gemm_output(c, a.rows, b.rows, config.output, {});
}

std::string describe(const Case& c, Fp8Format format, OutputType output, int block_n) {
  return std::string(format_name(format)) + " " + output_type_name(output) + " width " + std::to_string(block_n) +
         " M=" + std::to_string(c.m) + " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k) + " A " +
         c.a_granularity + " B " + c.b_granularity + " N_C " + c.promotion;
}

// One case at one width: GPU against the emulation, recorded, checked.
void check_case(const Case& c, Fp8Format format, OutputType output, int block_n, std::mt19937_64& rng) {
  const QuantizedTensor a = test::random_code_operand(c.m, c.k, format, c.a_granularity, rng, false);
  const QuantizedTensor b = test::random_code_operand(c.n, c.k, format, c.b_granularity, rng, false);
  GemmConfig config;
  config.promotion = PromotionInterval::parse(c.promotion);
  config.output = output;
  const BitwiseComparison r = compare_bitwise(run_tiled(a, b, config, block_n), cpu::gemm_nt(a, b, config));
  const std::string which = describe(c, format, output, block_n);
  test::record_finding("tiled wgmma vs cpu hopper", which, r);
  INFO(which << ": " << r.mismatches << " of " << r.count << " differ, max " << r.max_ulp << " ULP");
  CHECK(r.mismatches == 0);
}

}  // namespace

TEST_CASE("gpu: tiled WGMMA kernel equals the CPU hopper emulation bit for bit at every width") {
  const int sms = cuda::device_sm_count();
  // N = 328 and 520 put tiles of 160 and 192 across 128-column B blocks (n0 = 160: block 1 ends
  // at column 256); tall_m gives every CTA at least two tiles at width 160.
  const std::int64_t tall_m = 128 * ((2 * sms + 9) / 10 + 1) - 5;  // 10 column tiles of 160 per row of tiles
  const std::vector<Case> cases = {{77, 136, 400, "tile:1x128", "block:128x128", "128"},
                                   {200, 328, 1024, "tile:1x128", "block:128x128", "128"},
                                   {1, 8, 160, "tile:1x128", "block:128x128", "128"},
                                   {300, 520, 2048, "tile:1x128", "block:256x256", "128"},
                                   {129, 264, 16, "tensor", "tensor", "128"},
                                   {tall_m, 1600, 384, "tile:1x128", "block:128x128", "128"}};
  std::mt19937_64 rng(20261201);
  for (const int width : kTiledWidths)
    for (const char* promotion : {"128", "64", "32"}) {
      if (width == 192 && std::string(promotion) != "128") continue;  // no such instance (wgmma_tiled_plan.hpp)
      for (const OutputType output : {OutputType::fp32, OutputType::bf16})
        for (Case c : cases) {
          if (std::string(promotion) != "128" && c.m == tall_m) continue;  // the long case once per width
          c.promotion = promotion;
          check_case(c, Fp8Format::e4m3, output, width, rng);
        }
    }
}

TEST_CASE("gpu: tiled WGMMA kernel, width-128 instances: E5M2, B per row, long intervals") {
  const std::vector<Case> cases = {{130, 72, 512, "row", "row", "256"},       {96, 128, 400, "row", "row", "never"},
                                   {129, 256, 1024, "tensor", "tensor", "never"}, {50, 136, 640, "tile:1x128", "row", "64"},
                                   {33, 128, 384, "row", "block:128x128", "128"}, {257, 512, 4096, "tile:1x128", "block:128x128", "32"}};
  std::mt19937_64 rng(91);
  for (const Fp8Format format : {Fp8Format::e4m3, Fp8Format::e5m2})
    for (const OutputType output : {OutputType::fp32, OutputType::bf16})
      for (const Case& c : cases) check_case(c, format, output, 0, rng);  // the plan's width: 128 for these
}

TEST_CASE("gpu: tiled WGMMA exact control, codes in {0, +-1, +-2}, every width") {
  // |partial| < 2^13 (4 per product, at most 128 products): every partial exact under any
  // alignment or truncation, so a mismatch is a kernel bug (indexing, scales, epilogue).
  std::mt19937_64 rng(5);
  for (const int width : kTiledWidths) {
    const std::int64_t m = 256, n = 520, k = 1024;
    QuantizedTensor a = test::random_code_operand(m, k, Fp8Format::e4m3, "tile:1x128", rng, true);
    QuantizedTensor b = test::random_code_operand(n, k, Fp8Format::e4m3, "block:128x128", rng, true);
    static constexpr std::uint8_t kCodes[] = {0x00, 0x38, 0xB8, 0x40, 0xC0};  // 0, 1, -1, 2, -2 in E4M3
    for (std::uint8_t& code : a.codes) code = kCodes[rng() % 5];
    for (std::uint8_t& code : b.codes) code = kCodes[rng() % 5];
    GemmConfig config;
    const BitwiseComparison r = compare_bitwise(run_tiled(a, b, config, width), cpu::gemm_nt(a, b, config));
    test::record_finding("tiled wgmma exact control", "width " + std::to_string(width), r);
    INFO("width " << width << ": " << r.mismatches << " of " << r.count << " differ");
    CHECK(r.mismatches == 0);
  }
}

TEST_CASE("gpu: grouped tiled WGMMA (contiguous layout) equals the CPU grouped emulation bit for bit") {
  // 4 experts over 9 blocks: unsorted, a padding block, an idle expert; N = 264 (a width-160
  // or -192 tile crosses B blocks), K with a tail.
  const std::vector<std::int32_t> block_expert = {2, 2, 0, -1, 1, 0, 2, 1, 1};
  const std::int64_t m = 128 * static_cast<std::int64_t>(block_expert.size()), n = 264, k = 784;
  std::mt19937_64 rng(64);
  for (const OutputType output : {OutputType::fp32, OutputType::bf16})
    for (const char* promotion : {"128", "32"}) {
      const QuantizedTensor a = test::random_code_operand(m, k, Fp8Format::e4m3, "tile:1x128", rng, false);
      std::vector<QuantizedTensor> experts;
      for (int e = 0; e < 4; ++e) experts.push_back(test::random_code_operand(n, k, Fp8Format::e4m3, "block:128x128", rng, false));
      GemmConfig config;
      config.promotion = PromotionInterval::parse(promotion);
      config.output = output;
      cuda::CudaAllocator allocator;
      MemoryLedger ledger(&allocator);
      const BitwiseComparison r = compare_bitwise(cuda::wgmma_tiled_grouped_nt_host(a, experts, block_expert, config, ledger),
                                                  cpu::gemm_grouped_contiguous_nt(a, experts, block_expert, config));
      const std::string which = std::string(output_type_name(output)) + " N_C " + promotion;
      test::record_finding("grouped tiled wgmma vs cpu", which, r);
      INFO(which << ": " << r.mismatches << " of " << r.count << " differ");
      CHECK(r.mismatches == 0);
    }
}

TEST_CASE("gpu: tiled WGMMA kernel refuses what it cannot run, before launching") {
  std::mt19937_64 rng(3);
  cuda::CudaAllocator allocator;
  MemoryLedger ledger(&allocator);
  const QuantizedTensor a = test::random_code_operand(64, 200, Fp8Format::e4m3, "row", rng, false);
  CHECK_THROWS_WITH(cuda::wgmma_tiled_gemm_nt_host(a, a, GemmConfig{}, {}, ledger), Catch::Contains("K must be a multiple of 16"));
  const QuantizedTensor g = test::random_code_operand(200, 128, Fp8Format::e4m3, "tile:1x128", rng, false);
  const std::vector<QuantizedTensor> experts = {test::random_code_operand(64, 128, Fp8Format::e4m3, "block:128x128", rng, false)};
  const std::vector<std::int32_t> blocks = {0, 0};
  CHECK_THROWS_WITH(cuda::wgmma_tiled_grouped_nt_host(g, experts, blocks, GemmConfig{}, ledger), Catch::Contains("multiple of 128"));
  CHECK(ledger.peak_total() == 0);
}
