// A linear layer's three GEMMs on the GPU (kernels/cuda/linear_gemms_cuda.hpp) against the CPU
// engine's (kernels/train/linear_gemm.hpp) for the same precision, bit for bit: the deepseek_v3
// recipe (1x128 / 128x128, Wgrad re-quantized transposed, B = X^T per tile:1x128), N_C 32 and
// 128 variants, per-row scales with N_C never, Wgrad accumulating; shapes with tails in every
// dimension. And the refusals: the exact line for a recipe the GPU does not run.
#include <catch2/catch.hpp>

#include <random>
#include <string>
#include <vector>

#include "harness/metrics/error_metrics.hpp"
#include "kernels/cuda/cuda_allocator.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/linear_gemms_cuda.hpp"
#include "kernels/train/linear_gemm.hpp"
#include "tests/gpu/gpu_findings.hpp"

using namespace fp8lab;
using train::GemmKind;
using train::GemmPrecision;

namespace {

std::vector<float> gaussian(std::size_t n, std::mt19937_64& rng, float sigma) {
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

train::Tensor<float> host_tensor(MemoryLedger& ledger, std::int64_t rows, std::int64_t cols, const std::vector<float>& v) {
  train::Tensor<float> t = train::make_tensor<float>(ledger, rows, cols, MemoryCategory::other);
  std::copy(v.begin(), v.end(), t.data());
  return t;
}

struct Gpu {
  cuda::CudaAllocator allocator;
  MemoryLedger ledger{&allocator};
  DeviceBuffer put(const std::vector<float>& v) {
    DeviceBuffer b = ledger.allocate(v.size() * sizeof(float), MemoryCategory::other);
    FP8LAB_CUDA_CHECK(cudaMemcpy(b.data(), v.data(), v.size() * sizeof(float), cudaMemcpyHostToDevice));
    return b;
  }
  std::vector<float> get(const DeviceBuffer& b, std::size_t n) {
    std::vector<float> v(n);
    FP8LAB_CUDA_CHECK(cudaMemcpy(v.data(), b.data(), n * sizeof(float), cudaMemcpyDeviceToHost));
    return v;
  }
};

// The three GEMMs of one layer (rows tokens, in -> out) on both sides, compared.
void check_layer(const train::PrecisionRecipe& recipe, const std::string& name, std::int64_t rows, std::int64_t in,
                 std::int64_t out, std::mt19937_64& rng) {
  const std::vector<float> x = gaussian(rows * in, rng, 1.0f), w = gaussian(out * in, rng, 0.05f),
                           dy = gaussian(rows * out, rng, 1e-3f), dw0 = gaussian(out * in, rng, 1e-4f);
  HostAllocator host;
  MemoryLedger cpu_ledger(&host);
  const train::Tensor<float> tx = host_tensor(cpu_ledger, rows, in, x), tw = host_tensor(cpu_ledger, out, in, w),
                             tdy = host_tensor(cpu_ledger, rows, out, dy);
  train::Tensor<float> ty = train::make_tensor<float>(cpu_ledger, rows, out, MemoryCategory::other);
  train::Tensor<float> tdx = train::make_tensor<float>(cpu_ledger, rows, in, MemoryCategory::other);
  train::Tensor<float> tdw = host_tensor(cpu_ledger, out, in, dw0);
  train::fprop(train::GemmCall{cpu_ledger, recipe.fprop}, tx, tw, ty);
  train::dgrad(train::GemmCall{cpu_ledger, recipe.dgrad}, tdy, tw, tdx);
  train::wgrad(train::GemmCall{cpu_ledger, recipe.wgrad, &recipe.dgrad, &recipe.fprop}, tdy, tx, tdw, true, 0, rows);

  Gpu gpu;
  const DeviceBuffer dx_ = gpu.put(x), dw_ = gpu.put(w), ddy = gpu.put(dy), ddw = gpu.put(dw0);
  const DeviceBuffer dy_out = gpu.put(std::vector<float>(rows * out)), ddx = gpu.put(std::vector<float>(rows * in));
  const auto* px = static_cast<const float*>(dx_.data());
  const auto* pw = static_cast<const float*>(dw_.data());
  const auto* pdy = static_cast<const float*>(ddy.data());
  cuda::fprop({gpu.ledger, recipe.fprop, nullptr, nullptr, name}, px, pw, static_cast<float*>(dy_out.data()), rows, in, out);
  cuda::dgrad({gpu.ledger, recipe.dgrad, nullptr, nullptr, name}, pdy, pw, static_cast<float*>(ddx.data()), rows, out, in);
  cuda::wgrad({gpu.ledger, recipe.wgrad, &recipe.dgrad, &recipe.fprop, name}, pdy, px, static_cast<float*>(ddw.data()), rows,
              out, in, true);
  const std::string shape = name + " rows=" + std::to_string(rows) + " in=" + std::to_string(in) + " out=" + std::to_string(out);
  const std::pair<const char*, BitwiseComparison> results[] = {
      {"fprop", compare_bitwise(gpu.get(dy_out, rows * out), ty.span())},
      {"dgrad", compare_bitwise(gpu.get(ddx, rows * in), tdx.span())},
      {"wgrad (accumulating)", compare_bitwise(gpu.get(ddw, out * in), tdw.span())}};
  for (const auto& [gemm, r] : results) {
    test::record_finding("linear gemms gpu vs cpu engine", std::string(gemm) + " " + shape, r);
    INFO(gemm << " " << shape << ": " << r.mismatches << " of " << r.count << " differ, max " << r.max_ulp << " ULP");
    CHECK(r.mismatches == 0);
  }
}

}  // namespace

TEST_CASE("gpu: fprop, dgrad and wgrad on the GPU equal the CPU engine bit for bit") {
  std::mt19937_64 rng(2026);
  train::PrecisionRecipe deepseek = train::named_recipe("deepseek_v3");
  check_layer(deepseek, "deepseek_v3", 256, 512, 384, rng);
  check_layer(deepseek, "deepseek_v3", 208, 400, 272, rng);  // tails: tokens, in and out (each K a multiple of 16)
  train::PrecisionRecipe short_interval = deepseek;
  for (GemmPrecision* p : {&short_interval.fprop, &short_interval.dgrad, &short_interval.wgrad})
    p->gemm.promotion = PromotionInterval::parse("32");
  check_layer(short_interval, "deepseek_v3 with N_C 32", 384, 256, 528, rng);
  train::PrecisionRecipe rows = deepseek;  // per-row (per-token / per-channel) scales, one partial over K
  for (GemmPrecision* p : {&rows.fprop, &rows.dgrad, &rows.wgrad}) {
    p->a_granularity = p->b_granularity = Granularity::row();
    p->requantize_transposed = false;
    p->gemm.promotion = PromotionInterval::parse("never");
  }
  check_layer(rows, "per-row never", 160, 256, 144, rng);
}

TEST_CASE("gpu: the GPU linear GEMMs refuse what they cannot run with one line naming recipe, GEMM and device") {
  const train::PrecisionRecipe hybrid = train::named_recipe("hybrid");
  cuda::CudaAllocator allocator;
  MemoryLedger ledger(&allocator);
  const std::string why = cuda::linear_gemm_failure({ledger, hybrid.dgrad, nullptr, nullptr, "hybrid"}, GemmKind::dgrad, 256, 512, 384);
  INFO(why);
  CHECK(why.rfind("cuda dgrad of recipe 'hybrid' (", 0) == 0);
  CHECK(why.find(") cannot run on ") != std::string::npos);
  CHECK(why.find("one FP8 format") != std::string::npos);
  CHECK(why.find('\n') == std::string::npos);
  const GemmPrecision bf16 = GemmPrecision::plain(GemmPrecision::Kind::bf16);
  CHECK_THROWS_WITH(cuda::fprop({ledger, bf16, nullptr, nullptr, "bf16"}, nullptr, nullptr, nullptr, 128, 128, 128),
                    Catch::Contains("only fp8 GEMMs run on the GPU"));
  const train::PrecisionRecipe deepseek = train::named_recipe("deepseek_v3");
  CHECK(cuda::linear_gemm_failure({ledger, deepseek.wgrad, &deepseek.dgrad, &deepseek.fprop, "deepseek_v3"}, GemmKind::wgrad,
                                  256, 512, 384)
            .empty());
  CHECK(ledger.peak_total() == 0);
}
