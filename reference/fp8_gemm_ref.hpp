#pragma once
// References for the FP8 GEMM C = A * B^T (A: M x K, B: N x K, both K-major):
//
// 1. fp8_gemm_model_ref: the tensor-core accumulation model + FP32 promotion of DESIGN.md
//    section 2, computed from its definition with exact integer arithmetic: every FP8 code is
//    taken apart into sign, integer significand and exponent, every aligned term is an
//    integer shift, the sum is an int64. It shares no code with kernels/ (which uses FP32
//    conversions instead), so agreement to the bit is evidence about both.
// 2. gemm_fp64 (reference/fp64_dot_ref.hpp): the FP64 GEMM in a fixed summation order, for
//    the quantization / accumulation / total errors.
#include <Eigen/Dense>
#include <cstdint>

#include "reference/float_formats_ref.hpp"
#include "reference/fp64_dot_ref.hpp"
#include "reference/quantize_ref.hpp"

namespace fp8lab::ref {

struct Fp8OperandRef {
  const CodeMatrix* codes = nullptr;       // rows x K
  const Eigen::MatrixXd* scales = nullptr;  // the scale grid (FP32 values)
  Eigen::Index tile_rows = 1, tile_cols = 1;  // extent of one scale
  const FormatDefinition* format = nullptr;  // each operand its own: E4M3 x E5M2 mixes are allowed
};

struct AccumulationRef {
  bool fp32_fma = false;      // p = fma32(a, b, p) per product, instead of the fused model
  int fraction_bits = 13;     // F
  int depth = 32;             // products per instruction
  bool round_to_nearest_even = false;  // instead of truncation toward zero
  // The exponent of an FP8 zero in the alignment: false gives it -126 (MMA-Sim: a zero
  // factor never raises E), true the format's minimum exponent, as a subnormal.
  bool zero_as_subnormal = false;
};

// interval: N_C in elements, or 0 for "never" (one partial over all of K). K is zero-padded
// to a multiple of depth. bf16_output rounds acc to BF16 (RNE). Returns M x N FP32 values.
Eigen::MatrixXf fp8_gemm_model_ref(const Fp8OperandRef& a, const Fp8OperandRef& b, const AccumulationRef& model,
                                   Eigen::Index interval, bool bf16_output);

// The operand's exact values q * sf in FP64.
Eigen::MatrixXd dequantize_fp64(const Fp8OperandRef& operand);

}  // namespace fp8lab::ref
