#pragma once
// The found-inf flag of a training step: one FP32 in backend memory, allocated through the
// memory ledger (category workspace) like every other device buffer. 0 means every gradient
// element checked so far was finite; the check-and-unscale kernels set it to 1 and never clear
// it, so several calls in one step (one per gradient bucket) accumulate, as PyTorch's found_inf
// tensor does. The caller clears it before the step's first check: on the CPU backend by
// writing *data() = 0, on a GPU with cuda::clear_found_inf (kernels/cuda/check_finite_and_unscale_cuda.hpp).
#include "kernels/memory_ledger.hpp"

namespace fp8lab {

class FoundInfFlag {
 public:
  // Throws std::invalid_argument for a shapes-only ledger (there is no memory to hold a flag).
  explicit FoundInfFlag(MemoryLedger& ledger);
  float* data() const { return static_cast<float*>(buffer_.data()); }

 private:
  DeviceBuffer buffer_;
};

}  // namespace fp8lab
