#pragma once
// CUDA backend: the fused multi-tensor check-finite-and-unscale, the same contract as
// kernels/cpu/check_finite_and_unscale.hpp bit for bit (one IEEE FP32 multiply per element,
// no FMA, no flush to zero; the check on the input):
//   x <- fl32(x * inverse_scale) in place; *found_inf <- 1.0f if any input was inf or NaN.
// One launch covers the whole list, whatever its length: the tensors are cut into chunks of at
// most kChunkElements, one CUDA block per chunk, described by a table that lives on the device
// (DeviceTensorList, built once: a model's gradient buffers do not move between steps). The
// flag is a single device FP32 (FoundInfFlag over a ledger with CudaAllocator) that blocks only
// ever set; nothing inside synchronizes with the host: the caller reads the flag
// (read_found_inf) when it decides whether to skip the optimizer step.
#include <cuda_runtime.h>

#include <cstdint>
#include <span>

#include "kernels/memory_ledger.hpp"

namespace fp8lab::cuda {

inline constexpr std::int64_t kChunkElements = 16384;

// The chunk table of a list of device tensors, in ledger memory (category workspace).
class DeviceTensorList {
 public:
  // tensors: spans over device memory (FP32). Throws std::invalid_argument for a null pointer
  // with a nonzero size or a shapes-only ledger.
  DeviceTensorList(MemoryLedger& ledger, std::span<const std::span<float>> tensors);
  std::int64_t chunk_count() const { return chunks_; }
  std::int64_t element_count() const { return elements_; }
  const void* device_table() const { return table_.data(); }

 private:
  DeviceBuffer table_;
  std::int64_t chunks_ = 0, elements_ = 0;
};

// Asynchronous on `stream`; an empty list launches nothing.
void check_finite_and_unscale(const DeviceTensorList& tensors, float inverse_scale, float* d_found_inf,
                              cudaStream_t stream);

void clear_found_inf(float* d_found_inf, cudaStream_t stream);        // asynchronous
bool read_found_inf(const float* d_found_inf, cudaStream_t stream);  // waits for `stream`

}  // namespace fp8lab::cuda
