#pragma once
// The CUDA backend: quantization on the GPU, GEMMs by one of two engines:
//   wgmma     fp8lab's own kernel (kernels/cuda/wgmma_gemm.hpp): the hopper model with any
//             promotion interval it takes, bit-exact with the CPU emulation by design;
//   cublaslt  cuBLASLt's block-scaled FP8 GEMM: one fixed arithmetic, run only for the
//             configuration it was measured to compute bit for bit on an H200 (hopper,
//             N_C = 128, 1x128 A, 128x128 B; results/gpu/2026-11-26-h200).
// Buffers are counted in the backend's memory ledger (cudaMalloc).
#include <memory>

#include "kernels/backend.hpp"

namespace fp8lab::cuda {

enum class GemmEngine { wgmma, cublaslt };

// Throws std::invalid_argument with the reason when no CUDA device can be used.
std::unique_ptr<Backend> make_cuda_backend(GemmEngine engine = GemmEngine::wgmma);

}  // namespace fp8lab::cuda
