#pragma once
// Reference for Blackwell's block-scaled MMA (`--accum b200`; the model: MMA-Sim's MMA_ST_FDPA
// for kind::mxf8f6f4 and MMA_GST_FDPA for kind::mxf4nvf4, FACTS.md "Accumulators"), written
// from the model's definition with exact integer arithmetic: every element, scale and FP32
// accumulator is taken apart into sign, integer significand and the exponent of its last
// bit; a term is an integer shifted to units of 2^(E - F) (truncating its magnitude), the
// sum is a 128-bit integer, and the FP32 rounding toward zero is done on that integer. It
// shares no code with kernels/ (whose emulation works in FP64 arithmetic), so agreement to
// the bit is evidence about both.
#include <Eigen/Dense>

#include "reference/float_formats_ref.hpp"
#include "reference/quantize_ref.hpp"

namespace fp8lab::ref {

struct BlockScaledOperandRef {
  const CodeMatrix* codes = nullptr;        // rows x K
  const Eigen::MatrixXd* scales = nullptr;  // the scale grid
  Eigen::Index tile_rows = 1, tile_cols = 1;
  const FormatDefinition* format = nullptr;
  bool e4m3_scales = false;  // nvfp4's E4M3 block scales; otherwise UE8M0 (powers of two)
};

enum class BlockScaledInstructionRef { mxf8f6f4, mxf4nvf4 };

// C = A * B^T, the accumulator carried over all of K (zero-padded to the instruction's 32 or
// 64), then fl32(c * alpha) and, for bf16_output, BF16 rounding to nearest even.
Eigen::MatrixXf block_scaled_mma_ref(const BlockScaledOperandRef& a, const BlockScaledOperandRef& b,
                                     BlockScaledInstructionRef instruction, float alpha, bool bf16_output);

}  // namespace fp8lab::ref
