#pragma once
// A device allocation of n elements of T, freed when destroyed; for the kernels' host-side
// entry points and the tests. (The memory ledger is for study-level accounting.)
#include <cstddef>

#include "kernels/cuda/cuda_check.hpp"

namespace fp8lab::cuda {

template <class T>
class DeviceArray {
 public:
  explicit DeviceArray(std::size_t n) { FP8LAB_CUDA_CHECK(cudaMalloc(&pointer_, sizeof(T) * (n ? n : 1))); }
  ~DeviceArray() { cudaFree(pointer_); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  T* get() const { return pointer_; }

 private:
  T* pointer_ = nullptr;
};

}  // namespace fp8lab::cuda
