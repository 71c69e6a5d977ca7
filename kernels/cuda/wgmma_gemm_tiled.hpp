#pragma once
// fp8lab's tiled block-scaled FP8 GEMM for sm_90a, beside the first kernel
// (wgmma_gemm.hpp), which stays until a GPU window has shown this one exact and faster:
//   C[M, N] = A[M, K] * B[N, K]^T, per N_C elements of K a tensor-core partial p (wgmma
//   m64nNk32 from 0 on the unscaled FP8 codes), then s = fl32(s_a * s_b); acc = fma32(p, s, acc)
// the CPU `hopper` emulation's arithmetic bit for bit (DESIGN.md section 2), and its grouped
// form for MoE (DeepGEMM's contiguous layout, kernels/grouped_gemm_layout.hpp).
//
// What it does differently from the first kernel, and why (the budgets are in the .cu file):
//   tile width chosen per shape among 32, 64, 128, 160, 192 (wgmma_tiled_plan.hpp): fewer waves
//     at M = 4096 (N = 7168: 160 gives 11 waves where 128 gives 14), and enough tiles to fill
//     the SMs at M = 128 (N = 2112: 66 tiles of 32 where 128 gives 17);
//   no division in the main loop: scales are found by shifts fixed per GEMM, and s_a * s_b is
//     two to four multiplies per stage instead of one per accumulator (B's block is one scale
//     for 8 adjacent columns; a tile that crosses a B block boundary picks per 8 columns);
//   B per tile:1x128 as well (Wgrad's X^T, re-quantized along tokens), which the first kernel
//     refuses: the three GEMMs of training (linear_gemms_cuda.hpp) all run here;
//   the slot is handed back to the producer as soon as the stage's wgmmas are complete, before
//     the promotion's FMAs;
//   tiles walk down M in groups of 16 row blocks (concurrent CTAs share A and B tiles in L2);
//   BF16 output goes through shared memory (64-byte swizzle: no bank conflicts) and a TMA store
//     per 32-column slab, which runs while the warpgroup starts the next tile.
// Not done here (see the .cu header): 2-CTA clusters with TMA multicast, stmatrix, FFMA
// interleaving in SASS, widths above 192.
#include <cuda_runtime.h>

#include <cstdint>
#include <memory>

#include "kernels/cuda/wgmma_gemm.hpp"
#include "kernels/wgmma_tiled_plan.hpp"

namespace fp8lab::cuda {

struct WgmmaTiledProblem {
  std::int64_t m = 0, n = 0, k = 0;  // n: one expert's N in the grouped form
  Fp8Format format = Fp8Format::e4m3;
  const std::uint8_t* a = nullptr;  // M x K codes, K-major (row stride K bytes)
  const std::uint8_t* b = nullptr;  // N x K codes; grouped: experts x N x K, expert after expert
  const float* a_scales = nullptr;  // QuantizedTensor's row-major scale grid
  const float* b_scales = nullptr;  // grouped: each expert's grid after the other
  OutputType output = OutputType::fp32;
  void* c = nullptr;  // M x N, float or __nv_bfloat16, row-major
  // Grouped (contiguous layout): the expert of each 128-row block of A, ceil(M / 128) int32 on
  // the device; -1 marks a padding block, whose output rows are not written. nullptr: one GEMM.
  const std::int32_t* block_expert = nullptr;
  std::int64_t experts = 1;
  std::int64_t b_scales_per_expert = 0;  // entries of one expert's scale grid
};

// One GEMM made ready to launch (tensor maps encoded, shared-memory limit raised, grid sized),
// as WgmmaGemmLaunch: launch() only launches. plan: plan_wgmma_tiled_gemm on the same operands
// (for the grouped form, with one expert's B) and this device's SM count.
class WgmmaTiledLaunch {
 public:
  WgmmaTiledLaunch(const WgmmaTiledProblem& problem, const WgmmaTiledPlan& plan);
  void launch(cudaStream_t stream) const;
  struct Prepared;  // defined in wgmma_gemm_tiled.cu

 private:
  std::shared_ptr<const Prepared> prepared_;
};

// The instance a plan selects: its pipeline depth and shared memory (for reports and tests).
struct WgmmaTiledResources {
  int stages = 0;
  std::size_t shared_bytes = 0;
};
WgmmaTiledResources wgmma_tiled_resources(int block_n);

}  // namespace fp8lab::cuda
