#pragma once
// How fp8lab's tiled WGMMA kernel (kernels/cuda/wgmma_gemm_tiled.cu) runs one GEMM, decided on
// the host: its tile width, its tile order and how each thread finds its operands' scales
// without a division in the main loop. Pure host code (no CUDA): unit-tested on every machine.
//
// C[M, N] = A[M, K] * B[N, K]^T in tiles of 128 (M) x block_n (N) x 128 (K); what the kernel
// accepts at all is plan_wgmma_gemm's (kernels/gpu_gemm_preconditions.hpp), plus the widths
// below.
#include <cstdint>
#include <span>

#include "kernels/gpu_gemm_preconditions.hpp"

namespace fp8lab {

// Every tile width the kernel is built for (multiples of 32, the epilogue's 32-column slabs;
// at most 192: two accumulator sets of block_n / 2 FP32 registers a thread must fit in 232).
// 192 with N_C = 128 only: with N_C = 32 or 64 it spilled (ptxas: 160 and 264 bytes).
inline constexpr int kTiledWidths[] = {32, 64, 128, 160, 192};
inline constexpr int kTiledShortIntervalWidths[] = {32, 64, 128, 160};
// The widths of the instances outside the production path (E5M2, or B scaled per row of B):
// 128 only, to keep the kernel count down.
inline constexpr int kTiledNarrowWidths[] = {128};

// Scale addressing: the scale of (row r, 128-K stage kb) is
//   scales[(r >> row_shift) * scale_cols + (kb >> k_shift)]
// tile:1x128 gives shifts 0 and 0, row 0 and 30, tensor 30 and 30 (r, kb < 2^30), a B block of
// BxB rows log2 B and log2 B - 7. B per row or per tile:1x128 is read per output column (the
// kernel's per-column instances), per stage when k_shift < 30.
struct ScaleAddressing {
  int row_shift = 0, k_shift = 0;
  std::int64_t scale_cols = 1;
};

struct WgmmaTiledPlan {
  WgmmaLaunchPlan launch;   // N_C template, stages per promotion, K blocks, B per column
  int block_n = 128;
  int group_m = 16;         // tiles walk down M in groups of this many 128-row blocks (L2 reuse)
  ScaleAddressing a, b;
  std::int64_t m_blocks = 0, n_blocks = 0;
};

// The width that finishes a grid of m_blocks x ceil(n / width) tiles on `sms` persistent CTAs
// soonest, by a cost of waves x (width + 32): a tile's time grows with its width plus a fixed
// part (the A tile's loads and the epilogue, about a 32-wide tile's worth; a model, not a
// measurement). Ties go to the wider tile.
int choose_tiled_block_n(std::int64_t m_blocks, std::int64_t n, int sms, std::span<const int> widths);

// plan_wgmma_gemm's checks (B per tile:1x128 allowed) and launch plan, the width chosen for `sms` SMs among the instances
// built for these operands, and the scale addressing. Throws std::invalid_argument as
// plan_wgmma_gemm does, and for a B block that is not a power of two.
WgmmaTiledPlan plan_wgmma_tiled_gemm(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config,
                                     int sms);

}  // namespace fp8lab
