#pragma once
// A linear layer's three GEMMs, dispatched by the precision recipe. Every operand copy a
// GEMM makes (transposes, BF16/FP16-rounded operands, FP8 codes and scales) is counted in
// the ledger as gemm_workspace for the GEMM's duration; in shapes-only mode nothing is
// computed but the same buffers are counted. (FP8 codes and scales live in the CPU
// quantizer's own vectors; the ledger buffer of their size is the reservation a device
// would make, so allocating and shapes-only runs count the same bytes.)
//
// Order of the sums (non-FP8 kinds): every output element sums its K products in order of K
// from the value it starts from (0, or the existing C when accumulating), one rounding per
// product and per addition. So a GEMM whose K is split into consecutive slices, accumulated
// slice after slice, gives the very bits of one pass: what `slices:S` relies on. FP8 GEMMs
// run cpu::gemm_nt, whose promotion restarts per call: there, slicing K changes the bits.
#include <cstdint>
#include <span>
#include <string>

#include "kernels/memory_ledger.hpp"
#include "kernels/train/delayed_operand_scales.hpp"
#include "kernels/train/fp8_operand_stats.hpp"
#include "kernels/train/precision_recipe.hpp"
#include "kernels/train/tensor.hpp"

namespace fp8lab::train {

struct GemmCall {
  MemoryLedger& ledger;
  const GemmPrecision& precision;
  const GemmPrecision* requantize_source_a = nullptr;  // Wgrad re-quantization: dY's Dgrad precision
  const GemmPrecision* requantize_source_b = nullptr;  // ... and X's Fprop precision
  int element_bytes = 4;                                // of Real, as counted
  GemmOperandTally* tally = nullptr;  // fp8: what quantization did to A and B (fp8_operand_stats.hpp)
  // fp8 with delayed_scaling: the operands' scale states (delayed_operand_scales.hpp).
  DelayedOperand* delayed_a = nullptr;
  DelayedOperand* delayed_b = nullptr;
  // fp8 Fprop and Dgrad: receives A (X, dY) as the GEMM quantized it (fp8lab.torch keeps Fprop's X
  // so for a re-quantizing Wgrad, wgrad_requantized below).
  QuantizedTensor* quantized_a = nullptr;
  // fp8: the operands' ranges (amax, scales) beside the tally, when asked (fp8lab.torch's recorder).
  GemmOperandRanges* ranges = nullptr;
};

// The seed of an operand's stochastic rounding (GemmPrecision::a_rounding / b_rounding): a hash
// of its FP32 bits and of which operand it is ('a' or 'b'), so a run repeats bit for bit while
// each step's new gradients get new draws, with nothing to thread through the step.
std::uint64_t operand_rounding_seed(std::span<const float> x, char which);

// Y = X W^T   (X: rows x in, W: out x in, Y: rows x out)
template <class Real>
void fprop(const GemmCall& call, const Tensor<Real>& x, const Tensor<Real>& w, Tensor<Real>& y);
// dX = dY W   (dY: rows x out, W: out x in, dX: rows x in)
template <class Real>
void dgrad(const GemmCall& call, const Tensor<Real>& dy, const Tensor<Real>& w, Tensor<Real>& dx);
// dW (+)= dY^T X over rows [row_begin, row_end) of dY and X (dW: out x in).
template <class Real>
void wgrad(const GemmCall& call, const Tensor<Real>& dy, const Tensor<Real>& x, Tensor<Real>& dw, bool accumulate,
           std::int64_t row_begin, std::int64_t row_end);

// Wgrad's re-quantizing path (precision.requantize_transposed: DeepSeek-V3's) on X as Fprop quantized
// it (rows x in, 1xT tiles along in, e.g. kept by GemmCall::quantized_a): dW (+)= dY^T X over all of
// dY's rows (dY: rows x out, FP32), X^T re-quantized from x_fp8 and dY^T from dY's Dgrad quantization,
// as wgrad() computes them. x_source: X itself (rows x in), which the tally and ranges are taken
// against when the call asks for them (else they are left out: the FP8 copy is all there is).
void wgrad_requantized(const GemmCall& call, const Tensor<float>& dy, const QuantizedTensor& x_fp8, Tensor<float>& dw,
                       bool accumulate, const Tensor<float>* x_source = nullptr);

}  // namespace fp8lab::train
