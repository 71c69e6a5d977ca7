#include "kernels/cuda/cuda_allocator.hpp"

#include "kernels/cuda/cuda_check.hpp"

namespace fp8lab::cuda {

void* CudaAllocator::allocate(std::size_t bytes) {
  void* pointer = nullptr;
  FP8LAB_CUDA_CHECK(cudaMalloc(&pointer, bytes ? bytes : 1));
  return pointer;
}

void CudaAllocator::release(void* pointer) noexcept { cudaFree(pointer); }

std::size_t device_memory_in_use() {
  std::size_t free = 0, total = 0;
  FP8LAB_CUDA_CHECK(cudaMemGetInfo(&free, &total));
  return total - free;
}

}  // namespace fp8lab::cuda
