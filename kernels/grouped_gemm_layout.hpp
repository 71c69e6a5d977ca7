#pragma once
// The contiguous layout of a grouped (MoE) FP8 GEMM, DeepGEMM's `m_grouped_fp8_gemm_nt_contiguous`:
// the tokens routed to every expert are concatenated into one A[M, K] (K-major), each expert's
// run of rows padded to a multiple of 128, and one B[N, K] per expert. block_expert holds, per
// 128-row block of A, the expert whose B multiplies it, or -1 for a block of padding rows:
//   C[r, :] = A[r, :] * B_e^T   with e = block_expert[r / 128]   (-1: the row is not computed)
// Each expert's GEMM has the numerics of the plain GEMM (kernels/gemm_config.hpp), so C's rows
// of expert e are bit for bit those of gemm_nt(A_e, B_e) on that expert's rows alone. Shared by
// the CPU emulation (kernels/cpu/gemm_grouped_contiguous.hpp) and the CUDA kernel.
#include <cstdint>
#include <span>

#include "kernels/quantization.hpp"

namespace fp8lab {

inline constexpr std::int64_t kGroupedBlockRows = 128;

// Throws std::invalid_argument naming what is wrong: no expert, M not a multiple of 128,
// block_expert not one entry per 128-row block, an entry outside [-1, experts), experts of
// different shapes or quantization, or K differing between A and the experts.
void check_grouped_contiguous(const QuantizedTensor& a, std::span<const QuantizedTensor> experts,
                              std::span<const std::int32_t> block_expert);

// The given rows of q (in that order) as a tensor of their own, with their scales: for A
// operands scaled per tile:1xT, row or tensor (a scale tile one row high, or the whole tensor).
QuantizedTensor quantized_rows(const QuantizedTensor& q, std::span<const std::int64_t> rows);

}  // namespace fp8lab
