#pragma once
// CPU emulation of Blackwell's block-scaled MMA (`--accum b200`, kernels/block_scaled_mma.hpp
// defines it): C = A * B^T with the block scales inside every instruction and the FP32
// accumulator carried over all of K, then the epilogue's alpha and the output type.
// Arithmetic in FP64, each step exact: an FP8/FP6/FP4 product is exact in FP64, a power of
// two scales it exactly, and every truncated sum stays below 2^53 (F = 25: 33 terms < 2^28
// each; F = 35: 5 terms < 2^47 each). One thread computes one output row's sequence, so the
// bits do not depend on the thread count.
#include <vector>

#include "kernels/cpu/gemm_fp8_nt.hpp"

namespace fp8lab::cpu {

// Called by gemm_nt for the b200 model, the sampled indices checked. Throws
// std::invalid_argument when a UE8M0 operand holds a scale that is no power of two in
// [2^-127, 2^127] (a pow2 rule's 2^-126 floor is one; a hand-made tensor may not be).
std::vector<float> gemm_block_scaled(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config,
                                     const GemmOptions& options);

}  // namespace fp8lab::cpu
