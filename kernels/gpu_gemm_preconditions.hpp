#pragma once
// What each GPU GEMM engine can run, decided on the host before anything is launched, so a
// shape or configuration it cannot take is a readable error rather than a failed CUDA or
// cuBLASLt call. Pure host code (no CUDA): unit-tested on every machine.
//
// Shapes are those of C[M, N] = A[M, K] * B[N, K]^T (kernels/gemm_config.hpp).
#include <cstdint>
#include <string>

#include "kernels/gemm_config.hpp"
#include "kernels/quantization.hpp"

namespace fp8lab {

// ---- fp8lab's WGMMA kernel (kernels/cuda/wgmma_gemm.cu) -------------------------------------
// Tiles: 128 (M) x 128 (N) x 128 (K) per pipeline stage; wgmma m64n128k32.
inline constexpr std::int64_t kWgmmaBlockM = 128, kWgmmaBlockN = 128, kWgmmaBlockK = 128;

// How the kernel is instantiated for one GEMM.
struct WgmmaLaunchPlan {
  int promotion_template = 128;        // N_C as the kernel's template parameter: 32, 64 or 128
  std::int64_t stages_per_promotion = 1;  // for N_C >= 128: 128-K stages per partial
  bool b_scale_per_column = false;     // B scaled per row of B (per output column)
  std::int64_t k_blocks = 0;           // ceil(K / 128) pipeline stages per tile
  std::int64_t k_instructions = 0;     // ceil(K / 32) wgmma instructions per output tile
};

// Throws std::invalid_argument naming what does not fit: the accumulation model must be
// hopper (the hardware's), scales A: tile:1x128 | row | tensor, B: block:BxB (B >= 128) | row |
// tensor, N_C 32, 64 or a multiple of 128 (or never), K positive and a multiple of 16 (TMA
// strides are 16-byte multiples), N a multiple of 8 (the epilogue writes 8-column groups), both
// operands in one FP8 format (the kernel's instantiations; mixes run on the CPU). M is free.
// b_tiles: the tiled kernel (kernels/wgmma_tiled_plan.hpp) also takes B per tile:1x128 (Wgrad's
// X^T re-quantized along tokens), read per output column and stage like a per-row B.
WgmmaLaunchPlan plan_wgmma_gemm(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config,
                                bool b_tiles = false);

// ---- cuBLASLt (kernels/cuda/cublaslt_gemm.cpp) ---------------------------------------------
enum class CublasLtMode {
  block_scaled,  // FP8, A: VEC128_32F (tile:1x128), B: BLK128x128_32F or VEC128_32F
  per_tensor,    // FP8, one FP32 scale per operand
  bf16,          // BF16 operands, FP32 accumulation: the high-precision baseline
};
const char* cublaslt_mode_name(CublasLtMode mode);

// Empty when cuBLASLt takes this problem, else the reason (FACTS.md: FP8 is TN only, scale
// pointers 16-byte aligned, M and N multiples of 4 for block scaling; leading dimensions are
// 16-byte multiples, so K % 16 for FP8 and K % 8 for BF16, and the output's row N * bytes).
std::string cublaslt_precondition_failure(CublasLtMode mode, std::int64_t m, std::int64_t n, std::int64_t k,
                                          OutputType output);

// The operands' FP8 formats for a mode: empty when cuBLASLt has that GEMM (Hopper FP8 takes
// E4M3 x E4M3, E4M3 x E5M2 and E5M2 x E4M3; not E5M2 x E5M2), else the reason.
std::string cublaslt_format_failure(CublasLtMode mode, Fp8Format a, Fp8Format b);

// The operands' granularities for a mode: empty when they fit, else the reason.
std::string cublaslt_operand_failure(CublasLtMode mode, const Granularity& a, const Granularity& b);

// cuBLASLt's block-scaled path as a Backend GEMM: it computes one fixed arithmetic, a hopper
// partial per 128-K block, then fp8lab's promotion fma(p, fl(sa*sb), y) when B is in 128x128
// blocks: bit for bit the CPU emulation's (N_C = 128, E4M3) on an H200 with cuBLASLt 13.1
// (results/gpu/2026-11-26-h200; B in 1x128 tiles folds differently, see cublaslt_backend_failure). The
// configuration must be exactly that one, in formats cuBLASLt has (E4M3 x E4M3 and the mixes
// E4M3 x E5M2, E5M2 x E4M3, each operand passed with its own type; E5M2 x E5M2 does not
// exist); otherwise the reason, so a study skips the point instead of failing inside the GEMM.
std::string cublaslt_config_failure(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config);

// cuBLASLt as a Backend GEMM, which must compute the configuration asked for (the CPU emulation's
// bits): cublaslt_config_failure, and B in 128x128 blocks. With B in 1x128 tiles (VEC128 x
// VEC128) cuBLASLt folds each block as fma(fl(p*sa), sb, y), not fp8lab's fma(p, fl(sa*sb), y):
// 9386 of 24576 outputs differ on an H200 (results/gpu/2026-11-26-h200/findings.tsv).
std::string cublaslt_backend_failure(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config);

}  // namespace fp8lab
