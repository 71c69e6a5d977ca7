// Contract: the device runs exactly kernels/formats/float_formats.hpp (RNE, satfinite or
// nosat, canonical NaN); these kernels only apply it element-wise so tests can compare.
#include <cuda_fp8.h>
#include <dlfcn.h>

#include <string>

#include "kernels/cuda/cuda_check.hpp"
#include "kernels/cuda/device_array.hpp"
#include "kernels/cuda/float_formats_device.hpp"

namespace fp8lab::cuda {
namespace {

template <class F>
__global__ void decode_all_kernel(float* out) {
  const unsigned code = threadIdx.x;
  out[code] = decode<F>(code);
}

template <class F>
__global__ void encode_kernel(const float* x, std::uint8_t* out, std::size_t n, Saturation saturation) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = static_cast<std::uint8_t>(encode<F>(x[i], saturation));
}

template <class F>
__global__ void compare_with_hardware_kernel(std::uint64_t begin, unsigned long long* mismatches,
                                             unsigned long long* first) {
  const std::uint64_t bits = begin + blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
  const float x = float_from_bits(static_cast<std::uint32_t>(bits));
  constexpr __nv_fp8_interpretation_t kind = F::exponent_bits == 4 ? __NV_E4M3 : __NV_E5M2;
  const unsigned hardware = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, kind);
  if (hardware != encode<F>(x, Saturation::satfinite)) {
    atomicAdd(mismatches, 1ull);
    atomicMin(first, static_cast<unsigned long long>(bits));
  }
}

// The quantizer's short encoders, as device code runs them, against the codec's own encode:
// encode_e4m3_satfinite (its device branch, chosen when not constant-evaluated) and
// encode_e2m1_by_quantum_add.
enum class FastEncoder { e4m3_satfinite, e2m1_quantum_add };

template <FastEncoder kEncoder>
__global__ void compare_fast_encoder_kernel(std::uint64_t begin, unsigned long long* mismatches, unsigned long long* first) {
  const std::uint64_t bits = begin + blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
  const float x = float_from_bits(static_cast<std::uint32_t>(bits));
  const bool same = kEncoder == FastEncoder::e4m3_satfinite ? encode_e4m3_satfinite(x) == encode<E4M3>(x)
                                                            : encode_e2m1_by_quantum_add(x) == encode<E2M1>(x);
  if (!same) {
    atomicAdd(mismatches, 1ull);
    atomicMin(first, static_cast<unsigned long long>(bits));
  }
}

// Runs kernel(begin, mismatches, first) over all 2^32 patterns, 2^30 a launch.
template <class Launch>
HardwareComparison over_all_patterns(Launch launch) {
  DeviceArray<unsigned long long> counters(2);
  const unsigned long long initial[2] = {0ull, 1ull << 32};
  FP8LAB_CUDA_CHECK(cudaMemcpy(counters.get(), initial, sizeof initial, cudaMemcpyHostToDevice));
  constexpr std::uint64_t kChunk = 1ull << 30;  // 2^22 blocks of 256 threads per launch
  for (std::uint64_t begin = 0; begin < (1ull << 32); begin += kChunk) {
    launch(static_cast<unsigned>(kChunk / 256), begin, counters.get(), counters.get() + 1);
    FP8LAB_CUDA_CHECK(cudaGetLastError());
  }
  unsigned long long result[2];
  FP8LAB_CUDA_CHECK(cudaMemcpy(result, counters.get(), sizeof result, cudaMemcpyDeviceToHost));
  return {result[0], result[1]};
}

}  // namespace

int device_count() {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status == cudaSuccess) return count;
  if (status == cudaErrorNoDevice) return 0;
  // The runtime says "insufficient driver" both when there is no driver at all and when the
  // installed one is too old: only the first is a machine without a GPU.
  if (status == cudaErrorInsufficientDriver) {
    void* driver = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_LOCAL);
    if (driver == nullptr) return 0;
    dlclose(driver);
  }
  int runtime = 0, driver_version = 0;
  cudaRuntimeGetVersion(&runtime);
  cudaDriverGetVersion(&driver_version);
  throw std::runtime_error(std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(status) + ": " +
                           cudaGetErrorString(status) + " (CUDA runtime " + std::to_string(runtime) + ", driver " +
                           std::to_string(driver_version) + "; a driver is installed, so this is not 'no GPU')");
}

std::vector<float> decode_all_codes_on_device(Fp8Format format) {
  DeviceArray<float> out(256);
  if (format == Fp8Format::e4m3) decode_all_kernel<E4M3><<<1, 256>>>(out.get());
  else decode_all_kernel<E5M2><<<1, 256>>>(out.get());
  FP8LAB_CUDA_CHECK(cudaGetLastError());
  std::vector<float> host(256);
  FP8LAB_CUDA_CHECK(cudaMemcpy(host.data(), out.get(), 256 * sizeof(float), cudaMemcpyDeviceToHost));
  return host;
}

std::vector<std::uint8_t> encode_on_device(const std::vector<float>& x, Fp8Format format, Saturation saturation) {
  DeviceArray<float> in(x.size());
  DeviceArray<std::uint8_t> out(x.size());
  FP8LAB_CUDA_CHECK(cudaMemcpy(in.get(), x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
  const unsigned blocks = static_cast<unsigned>((x.size() + 255) / 256);
  if (!x.empty()) {
    if (format == Fp8Format::e4m3) encode_kernel<E4M3><<<blocks, 256>>>(in.get(), out.get(), x.size(), saturation);
    else encode_kernel<E5M2><<<blocks, 256>>>(in.get(), out.get(), x.size(), saturation);
    FP8LAB_CUDA_CHECK(cudaGetLastError());
  }
  std::vector<std::uint8_t> host(x.size());
  FP8LAB_CUDA_CHECK(cudaMemcpy(host.data(), out.get(), x.size(), cudaMemcpyDeviceToHost));
  return host;
}

HardwareComparison compare_with_hardware_conversion(Fp8Format format) {
  return over_all_patterns([&](unsigned blocks, std::uint64_t begin, unsigned long long* mismatches, unsigned long long* first) {
    if (format == Fp8Format::e4m3)
      compare_with_hardware_kernel<E4M3><<<blocks, 256>>>(begin, mismatches, first);
    else
      compare_with_hardware_kernel<E5M2><<<blocks, 256>>>(begin, mismatches, first);
  });
}

FastEncoderComparison compare_fast_encoders() {
  FastEncoderComparison c;
  c.e4m3_satfinite = over_all_patterns([](unsigned blocks, std::uint64_t begin, unsigned long long* mismatches,
                                          unsigned long long* first) {
    compare_fast_encoder_kernel<FastEncoder::e4m3_satfinite><<<blocks, 256>>>(begin, mismatches, first);
  });
  c.e2m1_quantum_add = over_all_patterns([](unsigned blocks, std::uint64_t begin, unsigned long long* mismatches,
                                            unsigned long long* first) {
    compare_fast_encoder_kernel<FastEncoder::e2m1_quantum_add><<<blocks, 256>>>(begin, mismatches, first);
  });
  return c;
}

}  // namespace fp8lab::cuda
