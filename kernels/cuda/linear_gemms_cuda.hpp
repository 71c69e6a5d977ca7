#pragma once
// A linear layer's three GEMMs on the GPU, on device pointers, with the bits of the CPU engine's
// (kernels/train/linear_gemm.hpp) for the same GemmPrecision: the operands are quantized by the
// CUDA quantizer (bit-identical to the CPU's), transposed or re-quantized as the engine does, and
// multiplied by the tiled WGMMA kernel (the CPU `hopper` emulation's arithmetic). For the
// PyTorch layer (DESIGN.md section 7) and the engine on a GPU.
//
// Contract (every pointer a device pointer, FP32, row-major and contiguous: row stride = cols):
//   fprop  Y  = X W^T    x: rows x in, w: out x in, y: rows x out
//   dgrad  dX = dY W     dy: rows x out, w: out x in, dx: rows x in        (B = W^T, quantized as in)
//   wgrad  dW (+)= dY^T X   dy: rows x out, x: rows x in, dw: out x in     (A = dY^T, B = X^T)
// with rows the tokens. Outputs are written whole (wgrad with accumulate adds, dw[i] += g[i] in
// FP32, as the engine's slices do). Asynchronous on call.stream; workspace (codes, scales,
// transposes) comes from call.ledger as gemm_workspace and is released on return, after the
// stream has finished with it (the entry points synchronize the stream before returning).
//
// What the GPU runs: kind fp8, accumulation hopper, one FP8 format on both operands, A per
// tile:1x128 / row / tensor, B per block:BxB (B >= 128) / tile:1x128 / row / tensor, N_C 32, 64 or
// a multiple of 128 (or never) that the scales allow, round-to-nearest, no RHT, no delayed
// scaling; Wgrad's requantize_transposed (DeepSeek-V3's) with its source precisions. Anything
// else is refused before any work with std::invalid_argument and one line:
//   "cuda <fprop|dgrad|wgrad> of recipe '<recipe>' (<precision>) cannot run on <device>: <why>"
// The deepseek_v3 recipe's three GEMMs run; hybrid and fp8_delayed (E5M2 x E4M3 mixes,
// delayed scaling) and the non-FP8 kinds are refused, never rerouted.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/memory_ledger.hpp"
#include "kernels/train/precision_recipe.hpp"

namespace fp8lab::cuda {

struct LinearGemmCall {
  MemoryLedger& ledger;  // over a CUDA allocator (kernels/cuda/cuda_allocator.hpp)
  const train::GemmPrecision& precision;
  const train::GemmPrecision* requantize_source_a = nullptr;  // wgrad re-quantizing: dY's Dgrad precision
  const train::GemmPrecision* requantize_source_b = nullptr;  // ... and X's Fprop precision
  std::string_view recipe = "";                               // named in refusals
  cudaStream_t stream = nullptr;
};

void fprop(const LinearGemmCall& call, const float* x, const float* w, float* y, std::int64_t rows, std::int64_t in,
           std::int64_t out);
void dgrad(const LinearGemmCall& call, const float* dy, const float* w, float* dx, std::int64_t rows, std::int64_t out,
           std::int64_t in);
void wgrad(const LinearGemmCall& call, const float* dy, const float* x, float* dw, std::int64_t rows, std::int64_t out,
           std::int64_t in, bool accumulate);

// Empty when the GPU runs this GEMM of these sizes, else the refusal line the entry point throws.
std::string linear_gemm_failure(const LinearGemmCall& call, train::GemmKind kind, std::int64_t rows, std::int64_t out,
                                std::int64_t in);

}  // namespace fp8lab::cuda
