// Contract: kernels/cuda/check_finite_and_unscale_cuda.hpp (= the CPU kernel's, bit for bit).
// Compiled with --fmad=false (CMakeLists.txt) so x * s is one IEEE multiply; no fast-math, so
// subnormal inputs and products are kept, as on the CPU.
// Layout: a table of chunks {pointer, count}, each at most kChunkElements elements of one
// tensor; grid = one block per chunk, 256 threads. A chunk whose pointer is 16-byte aligned
// and whose count is a multiple of 4 is read and written as float4 (chunk starts are multiples
// of kChunkElements into their tensor, so they keep the tensor's alignment).
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/cuda/check_finite_and_unscale_cuda.hpp"
#include "kernels/cuda/cuda_check.hpp"
#include "kernels/formats/host_device.hpp"

namespace fp8lab::cuda {
namespace {

constexpr int kThreads = 256;
constexpr unsigned kAbsMask = 0x7FFFFFFFu, kInfinityBits = 0x7F800000u;

struct Chunk {
  float* data;
  std::int64_t count;
};

// |x| bit patterns at or above +inf's are exactly the infs and NaNs (as on the CPU).
__device__ __forceinline__ unsigned unscale_one(float& x, float s) {
  const unsigned abs_bits = float_bits(x) & kAbsMask;
  x = __fmul_rn(x, s);  // never contracted into an FMA, whatever the flags
  return abs_bits;
}

__global__ void __launch_bounds__(kThreads) check_finite_and_unscale_kernel(const Chunk* chunks, float s, float* found_inf) {
  const Chunk c = chunks[blockIdx.x];
  unsigned max_abs = 0;
  const bool vectorized = (reinterpret_cast<std::uintptr_t>(c.data) % 16 == 0) && (c.count % 4 == 0);
  if (vectorized) {
    float4* v = reinterpret_cast<float4*>(c.data);
    for (std::int64_t i = threadIdx.x; i < c.count / 4; i += kThreads) {
      float4 x = v[i];
      max_abs = max(max_abs, unscale_one(x.x, s));
      max_abs = max(max_abs, unscale_one(x.y, s));
      max_abs = max(max_abs, unscale_one(x.z, s));
      max_abs = max(max_abs, unscale_one(x.w, s));
      v[i] = x;
    }
  } else {
    for (std::int64_t i = threadIdx.x; i < c.count; i += kThreads) {
      float x = c.data[i];
      max_abs = max(max_abs, unscale_one(x, s));
      c.data[i] = x;
    }
  }
  // Every writer stores the same 1.0f, so plain stores race harmlessly (no atomics needed).
  if (__syncthreads_or(max_abs >= kInfinityBits) && threadIdx.x == 0) *found_inf = 1.0f;
}

}  // namespace

DeviceTensorList::DeviceTensorList(MemoryLedger& ledger, std::span<const std::span<float>> tensors) {
  if (ledger.shapes_only()) throw std::invalid_argument("DeviceTensorList: the memory ledger is shapes-only");
  std::vector<Chunk> host;
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    const auto n = static_cast<std::int64_t>(tensors[t].size());
    if (n > 0 && tensors[t].data() == nullptr)
      throw std::invalid_argument("DeviceTensorList: tensor " + std::to_string(t) + " has " + std::to_string(n) +
                                  " elements but a null pointer");
    for (std::int64_t start = 0; start < n; start += kChunkElements)
      host.push_back({tensors[t].data() + start, std::min(kChunkElements, n - start)});
    elements_ += n;
  }
  chunks_ = static_cast<std::int64_t>(host.size());
  if (chunks_ > 0x7FFFFFFF) throw std::invalid_argument("DeviceTensorList: more than 2^31 - 1 chunks");
  if (chunks_ == 0) return;
  table_ = ledger.allocate(host.size() * sizeof(Chunk), MemoryCategory::workspace);
  // Built once per list, before the steps that use it: a synchronous copy is fine here.
  FP8LAB_CUDA_CHECK(cudaMemcpy(table_.data(), host.data(), host.size() * sizeof(Chunk), cudaMemcpyHostToDevice));
}

void check_finite_and_unscale(const DeviceTensorList& tensors, float inverse_scale, float* d_found_inf,
                              cudaStream_t stream) {
  if (d_found_inf == nullptr) throw std::invalid_argument("check_finite_and_unscale: found_inf is null (no flag allocated)");
  if (tensors.chunk_count() == 0) return;
  check_finite_and_unscale_kernel<<<static_cast<unsigned>(tensors.chunk_count()), kThreads, 0, stream>>>(
      static_cast<const Chunk*>(tensors.device_table()), inverse_scale, d_found_inf);
  FP8LAB_CUDA_CHECK(cudaGetLastError());
}

void clear_found_inf(float* d_found_inf, cudaStream_t stream) {
  FP8LAB_CUDA_CHECK(cudaMemsetAsync(d_found_inf, 0, sizeof(float), stream));
}

bool read_found_inf(const float* d_found_inf, cudaStream_t stream) {
  float flag = 0.0f;
  FP8LAB_CUDA_CHECK(cudaMemcpyAsync(&flag, d_found_inf, sizeof(float), cudaMemcpyDeviceToHost, stream));
  FP8LAB_CUDA_CHECK(cudaStreamSynchronize(stream));
  return flag != 0.0f;
}

}  // namespace fp8lab::cuda
