#pragma once
// What every GPU benchmark needs (device/METHOD.md): CUDA-event timing of the operation alone
// (Google Benchmark's UseManualTime), an L2 flush before each timed iteration so every
// iteration reads its operands from HBM, and the device's identity in the JSON context.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <exception>
#include <string>
#include <vector>

#include "kernels/benchmark_ratios.hpp"
#include "kernels/cuda/cuda_allocator.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_array.hpp"

namespace fp8lab::cuda::bench {

// Writes a buffer twice the L2's size, evicting whatever the last iteration left there.
class L2Flush {
 public:
  L2Flush() : bytes_(2 * static_cast<std::size_t>(l2_bytes())), buffer_(bytes_) {}
  void operator()(cudaStream_t stream) { FP8LAB_CUDA_CHECK(cudaMemsetAsync(buffer_.get(), 0, bytes_, stream)); }

 private:
  static int l2_bytes() {
    int device = 0, bytes = 0;
    FP8LAB_CUDA_CHECK(cudaGetDevice(&device));
    FP8LAB_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, device));
    return bytes;
  }
  std::size_t bytes_;
  DeviceArray<unsigned char> buffer_;
};

// One flush buffer for the whole run (allocated on first use, not per benchmark call).
inline L2Flush& l2_flush() {
  static L2Flush flush;
  return flush;
}

// Times `op` with CUDA events after an L2 flush, once per benchmark iteration.
template <class Op>
void time_iterations(benchmark::State& state, Op&& op) {
  L2Flush& flush = l2_flush();
  cudaEvent_t start, stop;
  FP8LAB_CUDA_CHECK(cudaEventCreate(&start));
  FP8LAB_CUDA_CHECK(cudaEventCreate(&stop));
  op();  // warm-up: module load, first-touch, heuristics
  FP8LAB_CUDA_CHECK(cudaDeviceSynchronize());
  for (auto _ : state) {
    flush(nullptr);
    FP8LAB_CUDA_CHECK(cudaEventRecord(start));
    op();
    FP8LAB_CUDA_CHECK(cudaEventRecord(stop));
    FP8LAB_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    FP8LAB_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    state.SetIterationTime(ms / 1e3);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

// One CUDA allocator and memory ledger for a benchmark binary's device buffers, made on first use
// (the ledger is destroyed before the allocator it returns memory to).
inline MemoryLedger& bench_ledger() {
  static CudaAllocator allocator;
  static MemoryLedger ledger(&allocator);
  return ledger;
}

// Registers `fn` (void(benchmark::State&)) under `name`, timed by CUDA events (manual time, in
// microseconds). A benchmark that throws (a refused precondition, a failed CUDA or cuBLASLt
// call) is reported as an error with the reason, and the others still run.
template <class Fn>
void register_timed(const std::string& name, Fn fn) {
  benchmark::RegisterBenchmark(name.c_str(), [fn](benchmark::State& st) {
    try {
      fn(st);
    } catch (const std::exception& e) {
      st.SkipWithError(e.what());
    }
  })->UseManualTime()->Unit(benchmark::kMicrosecond);
}

// The main of a GPU benchmark binary: with no CUDA device it says so and returns 77 (ctest:
// skipped); otherwise it puts the GPU name, SM count, clocks, driver, runtime and cuBLASLt
// versions and the command line into the JSON context (so that results carry where they were
// measured) and runs the benchmarks with fp8lab::bench::run_with_ratios.
int run_gpu_benchmarks(int argc, char** argv, const std::string& counter,
                       const std::vector<fp8lab::bench::RatioPair>& pairs);

}  // namespace fp8lab::cuda::bench
