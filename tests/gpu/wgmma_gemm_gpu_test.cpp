// fp8lab's WGMMA kernel against the CPU `hopper` emulation with the same N_C: 0 mismatches
// on random shapes (M, N and K tails), every finite code (subnormals, zeros, extremes), both
// formats, every scale combination the kernel takes, FP32 and BF16 outputs. This is also the
// test of the published Hopper accumulation model on silicon: a mismatch is reported with
// its count and max ULP distance (and recorded, gpu_findings.hpp) before the test fails.
#include <catch2/catch.hpp>
#include <random>

#include "harness/metrics/error_metrics.hpp"
#include "kernels/cpu/gemm_fp8_nt.hpp"
#include "kernels/cuda/cuda_allocator.hpp"
#include "kernels/cuda/gemm_cuda.hpp"
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

BitwiseComparison run_case(const Case& c, Fp8Format format, OutputType output, std::mt19937_64& rng) {
  const QuantizedTensor a = test::random_code_operand(c.m, c.k, format, c.a_granularity, rng, false);
  const QuantizedTensor b = test::random_code_operand(c.n, c.k, format, c.b_granularity, rng, false);
  GemmConfig config;
  config.promotion = PromotionInterval::parse(c.promotion);
  config.output = output;
  cuda::CudaAllocator allocator;
  MemoryLedger ledger(&allocator);
  const std::vector<float> gpu = cuda::wgmma_gemm_nt_host(a, b, config, {}, ledger);
  const std::vector<float> cpu = cpu::gemm_nt(a, b, config);
  return compare_bitwise(gpu, cpu);
}

}  // namespace

TEST_CASE("gpu: WGMMA kernel equals the CPU hopper emulation bit for bit") {
  // Tails in every dimension: M of 1 and 77 (inside one 128-row tile), N of 8 and 136 (a
  // partial 128-column tile), K of 16 (one padded instruction), 160 and 400 (partial stages),
  // and whole multi-stage runs (1024, 2048: the pipeline wraps its 6 slots).
  const std::vector<Case> cases = {
      {128, 128, 128, "tile:1x128", "block:128x128", "128"}, {77, 136, 400, "tile:1x128", "block:128x128", "128"},
      {200, 264, 1024, "tile:1x128", "block:128x128", "64"}, {1, 8, 160, "tile:1x128", "block:128x128", "32"},
      {300, 384, 2048, "tile:1x128", "block:128x128", "128"}, {64, 128, 16, "tile:1x128", "block:128x128", "32"},
      {130, 72, 512, "row", "row", "256"},                    {96, 128, 400, "row", "row", "never"},
      {129, 256, 1024, "tensor", "tensor", "never"},          {50, 136, 640, "tile:1x128", "row", "64"},
      {33, 128, 384, "row", "block:128x128", "128"},          {257, 512, 4096, "tile:1x128", "block:128x128", "128"}};
  std::mt19937_64 rng(20261121);
  for (Fp8Format format : {Fp8Format::e4m3, Fp8Format::e5m2})
    for (OutputType output : {OutputType::fp32, OutputType::bf16})
      for (const Case& c : cases) {
        const std::string which = std::string(format_name(format)) + " " + output_type_name(output) + " M=" +
                                  std::to_string(c.m) + " N=" + std::to_string(c.n) + " K=" + std::to_string(c.k) +
                                  " A " + c.a_granularity + " B " + c.b_granularity + " N_C " + c.promotion;
        const BitwiseComparison r = run_case(c, format, output, rng);
        test::record_finding("wgmma vs cpu hopper", which, r);
        INFO(which << ": " << r.mismatches << " of " << r.count << " differ, max " << r.max_ulp << " ULP");
        CHECK(r.mismatches == 0);
      }
}

TEST_CASE("gpu: WGMMA kernel refuses what it cannot run, before launching") {
  std::mt19937_64 rng(3);
  const QuantizedTensor a = test::random_code_operand(64, 200, Fp8Format::e4m3, "row", rng, false);
  const QuantizedTensor b = test::random_code_operand(64, 200, Fp8Format::e4m3, "row", rng, false);
  cuda::CudaAllocator allocator;
  MemoryLedger ledger(&allocator);
  CHECK_THROWS_WITH(cuda::wgmma_gemm_nt_host(a, b, GemmConfig{}, {}, ledger), Catch::Contains("K must be a multiple of 16"));
  CHECK(ledger.peak_total() == 0);  // refused before any device buffer was taken
}
