#pragma once
// The memory ledger's allocator on a GPU: cudaMalloc / cudaFree, so every device buffer a
// study or a GEMM wrapper takes is counted (kernels/memory_ledger.hpp). cudaMemGetInfo sees
// more (the context, cuBLASLt's own state, other processes); device_memory_in_use() gives
// that device-wide figure so the two can be recorded side by side.
#include <cstddef>

#include "kernels/memory_ledger.hpp"

namespace fp8lab::cuda {

class CudaAllocator final : public DeviceAllocator {
 public:
  void* allocate(std::size_t bytes) override;  // throws std::runtime_error (FP8LAB_CUDA_CHECK)
  void release(void* pointer) noexcept override;
  const char* name() const override { return "cudaMalloc"; }
};

// total - free from cudaMemGetInfo: device-wide bytes in use, by anything.
std::size_t device_memory_in_use();

}  // namespace fp8lab::cuda
