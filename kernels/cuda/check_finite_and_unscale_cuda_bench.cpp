// GPU check-finite-and-unscale bandwidth: 8 FP32 gradient tensors of 512 x 7168
// (117 MB) next to a device-to-device copy of the same bytes in the same run. Both read and
// write every byte once; bytes counted for both: the gradients once. Target: ratio >= 0.8.
// CUDA-event timing, L2 flushed before every iteration (bench_support.hpp).
#include <random>
#include <span>
#include <vector>

#include "kernels/cuda/bench_support.hpp"
#include "kernels/cuda/check_finite_and_unscale_cuda.hpp"
#include "kernels/cuda/cuda_allocator.hpp"
#include "kernels/loss_scaling/found_inf_flag.hpp"

namespace {

using namespace fp8lab;
constexpr std::size_t kTensors = 8, kElements = std::size_t{512} * 7168, kCount = kTensors * kElements;

float* device_gradients() {
  static cuda::DeviceArray<float> g(kCount);
  static const bool filled = [] {
    std::vector<float> host(kCount);
    std::mt19937 rng(1234);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& e : host) e = normal(rng);
    FP8LAB_CUDA_CHECK(cudaMemcpy(g.get(), host.data(), kCount * sizeof(float), cudaMemcpyHostToDevice));
    return true;
  }();
  (void)filled;
  return g.get();
}

void BM_DeviceCopyFp32(benchmark::State& state) {
  const float* x = device_gradients();
  cuda::DeviceArray<float> y(kCount);
  cuda::bench::time_iterations(state, [&] {
    FP8LAB_CUDA_CHECK(cudaMemcpyAsync(y.get(), x, kCount * sizeof(float), cudaMemcpyDeviceToDevice, nullptr));
  });
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(kCount * sizeof(float)));
}

void BM_CheckFiniteAndUnscale(benchmark::State& state) {
  float* g = device_gradients();
  cuda::CudaAllocator allocator;
  MemoryLedger ledger(&allocator);
  std::vector<std::span<float>> tensors;
  for (std::size_t t = 0; t < kTensors; ++t) tensors.emplace_back(g + t * kElements, kElements);
  const cuda::DeviceTensorList list(ledger, tensors);
  FoundInfFlag flag(ledger);
  cuda::clear_found_inf(flag.data(), nullptr);
  bool halve = true;  // x0.5 then x2: the values stay where they were, exactly
  cuda::bench::time_iterations(state, [&] {
    cuda::check_finite_and_unscale(list, halve ? 0.5f : 2.0f, flag.data(), nullptr);
    halve = !halve;
  });
  if (cuda::read_found_inf(flag.data(), nullptr)) state.SkipWithError("found an inf or NaN in finite gradients");
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(kCount * sizeof(float)));
}

BENCHMARK(BM_DeviceCopyFp32)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CheckFiniteAndUnscale)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) {
  return cuda::bench::run_gpu_benchmarks(
      argc, argv, "bytes_per_second",
      {{"BM_CheckFiniteAndUnscale", "BM_DeviceCopyFp32", "check_finite_and_unscale / D2D copy (target >= 0.8)"}});
}
