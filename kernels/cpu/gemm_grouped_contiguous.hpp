#pragma once
// The CPU emulation of the grouped (MoE) FP8 GEMM in the contiguous layout
// (kernels/grouped_gemm_layout.hpp): C[M, N] with C[r, :] = A[r, :] * B_e^T, e the expert of
// r's 128-row block, computed by the plain CPU GEMM (gemm_fp8_nt.hpp) on each expert's rows, so
// bit for bit what that GEMM gives each expert's tokens alone. Rows of padding blocks (-1) are 0.
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/gemm_config.hpp"
#include "kernels/grouped_gemm_layout.hpp"

namespace fp8lab::cpu {

// Throws std::invalid_argument as check_grouped_contiguous and plan_gemm (per expert) do.
std::vector<float> gemm_grouped_contiguous_nt(const QuantizedTensor& a, std::span<const QuantizedTensor> experts,
                                              std::span<const std::int32_t> block_expert, const GemmConfig& config);

}  // namespace fp8lab::cpu
