// Speed of the fused CPU check-finite-and-unscale on a DeepSeek-V3-size set of FP32 gradients
// (8 tensors of 512 x 7168, 117 MB in all: far beyond any cache), against a plain read of the
// same bytes in the same run on one core. Target: >= 0.5 x read bandwidth.
// Bytes counted: the gradients once (both benchmarks); the unscale also writes them back, so a
// memory-bound kernel reaches about half the read bandwidth with no time lost to the check.
#include <cstdint>
#include <cstring>
#include <random>
#include <span>
#include <vector>

#include "kernels/benchmark_ratios.hpp"
#include "kernels/cpu/check_finite_and_unscale.hpp"
#include "kernels/cpu/cpu_bench_context.hpp"

namespace {

constexpr std::size_t kTensors = 8, kElements = std::size_t{512} * 7168;

std::vector<std::vector<float>>& gradients() {
  static std::vector<std::vector<float>> g = [] {
    std::vector<std::vector<float>> v(kTensors, std::vector<float>(kElements));
    std::mt19937 rng(1234);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (auto& t : v)
      for (float& e : t) e = normal(rng);
    return v;
  }();
  return g;
}

std::int64_t gradient_bytes() { return static_cast<std::int64_t>(kTensors * kElements * sizeof(float)); }

// The baseline: every word read once, folded into a max of bit patterns (vectorizes, so the
// loop is bound by memory as the kernel is, not by a floating-point add chain).
void BM_ReadFp32(benchmark::State& state) {
  const auto& g = gradients();
  for (auto _ : state) {
    std::uint32_t m = 0;
    for (const auto& t : g)
      for (float x : t) {
        std::uint32_t b;
        std::memcpy(&b, &x, sizeof b);
        m = b > m ? b : m;
      }
    benchmark::DoNotOptimize(m);
  }
  state.SetBytesProcessed(state.iterations() * gradient_bytes());
}

void BM_CheckFiniteAndUnscale(benchmark::State& state) {
  auto& g = gradients();
  std::vector<std::span<float>> spans(g.begin(), g.end());
  float found_inf = 0.0f;
  bool halve = true;
  for (auto _ : state) {
    // Alternating x0.5 and x2 keeps the values where they were (exact in FP32, no subnormals).
    fp8lab::cpu::check_finite_and_unscale(spans, halve ? 0.5f : 2.0f, &found_inf);
    halve = !halve;
    benchmark::DoNotOptimize(found_inf);
    benchmark::ClobberMemory();
  }
  if (found_inf != 0.0f) state.SkipWithError("found an inf or NaN in finite gradients");
  state.SetBytesProcessed(state.iterations() * gradient_bytes());
}

BENCHMARK(BM_ReadFp32)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_CheckFiniteAndUnscale)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  fp8lab::bench::add_cpu_isa_context();
  return fp8lab::bench::run_with_ratios(
      argc, argv, "bytes_per_second",
      {{"BM_CheckFiniteAndUnscale", "BM_ReadFp32", "check_finite_and_unscale vs read"}});
}
