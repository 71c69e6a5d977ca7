#include "kernels/cuda/bench_support.hpp"

#include <cstdio>
#include <exception>

#include "kernels/cuda/cublaslt_gemm.hpp"
#include "kernels/cuda/float_formats_device.hpp"

namespace fp8lab::cuda::bench {
namespace {

void add_device_context(int argc, char** argv) {
  int device = 0, driver = 0, runtime = 0, sm_clock_khz = 0, memory_clock_khz = 0;
  FP8LAB_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp p{};
  FP8LAB_CUDA_CHECK(cudaGetDeviceProperties(&p, device));
  FP8LAB_CUDA_CHECK(cudaDriverGetVersion(&driver));
  FP8LAB_CUDA_CHECK(cudaRuntimeGetVersion(&runtime));
  FP8LAB_CUDA_CHECK(cudaDeviceGetAttribute(&sm_clock_khz, cudaDevAttrClockRate, device));
  FP8LAB_CUDA_CHECK(cudaDeviceGetAttribute(&memory_clock_khz, cudaDevAttrMemoryClockRate, device));
  benchmark::AddCustomContext("gpu_name", p.name);
  benchmark::AddCustomContext("gpu_sm", std::to_string(p.major) + std::to_string(p.minor));
  benchmark::AddCustomContext("gpu_sm_count", std::to_string(p.multiProcessorCount));
  benchmark::AddCustomContext("gpu_max_sm_clock_mhz", std::to_string(sm_clock_khz / 1000));
  benchmark::AddCustomContext("gpu_memory_clock_mhz", std::to_string(memory_clock_khz / 1000));
  benchmark::AddCustomContext("gpu_l2_bytes", std::to_string(p.l2CacheSize));
  benchmark::AddCustomContext("cuda_driver", std::to_string(driver));
  benchmark::AddCustomContext("cuda_runtime", std::to_string(runtime));
  benchmark::AddCustomContext("cublaslt", cublaslt_version_text());
  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  benchmark::AddCustomContext("command", command);
}

}  // namespace

int run_gpu_benchmarks(int argc, char** argv, const std::string& counter,
                       const std::vector<fp8lab::bench::RatioPair>& pairs) {
  int devices = 0;
  try {
    devices = device_count();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "GPU benchmarks cannot run: %s\n", e.what());
    return 1;
  }
  if (devices == 0) {
    std::puts("no CUDA device: GPU benchmarks skipped");
    return 77;
  }
  add_device_context(argc, argv);
  return fp8lab::bench::run_with_ratios(argc, argv, counter, pairs);
}

}  // namespace fp8lab::cuda::bench
