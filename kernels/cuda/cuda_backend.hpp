#pragma once
// The CUDA backend: quantization on the GPU now; its GEMMs (cuBLASLt, then fp8lab's WGMMA
// kernel) are the next issues, and until then gemm_unavailable_reason() says so.
#include <memory>

#include "kernels/backend.hpp"

namespace fp8lab::cuda {

// Throws std::invalid_argument with the reason when no CUDA device can be used.
std::unique_ptr<Backend> make_cuda_backend();

}  // namespace fp8lab::cuda
