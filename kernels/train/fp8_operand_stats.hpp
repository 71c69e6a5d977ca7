#pragma once
// What FP8 quantization did to the operands of a step's GEMMs, per linear layer and GEMM kind:
// signal and noise energy (SQNR = 10 log10(signal / noise)), and counts of the elements the
// quantizer saturated and flushed to zero. The engine tallies them when a StepInput asks
// (kernels/train/training_step.hpp); the training loop sums them over a step's sequences.
//
// Per element x of an operand, with its tile's scale sf and dequantized value x' = fl32(q sf):
//   signal += x^2, noise += (x - x')^2      in double, in element order
//   saturated: round-to-nearest-even of the scaled value fl32(x * fl32(1 / sf)) without the
//              clamp leaves the format's range, so satfinite clipped it (a value that merely
//              rounds down to fmt_max is not counted; the tie above fmt_max is clipped in E5M2,
//              whose fmt_max has an odd significand, and not in E4M3; for delayed scaling, which
//              multiplies by its own scale, fl32(1 / sf) is that scale or within an ulp of it)
//   flushed:   x != 0 and x' == 0 (below half the smallest subnormal times sf)
// A recomputed Fprop (activation policies) tallies its operands again: the same values twice,
// which leaves SQNR and the fractions unchanged.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/quantization.hpp"
#include "kernels/train/precision_recipe.hpp"

namespace fp8lab::train {

struct OperandTally {
  double signal = 0, noise = 0;
  std::int64_t elements = 0, saturated = 0, flushed = 0;

  void add(const OperandTally& other);
  double sqnr_db() const;  // +inf when noise is 0; NaN when there are no elements
};

struct GemmOperandTally {
  std::string layer;  // "L0.wq", "classifier"
  GemmKind kind = GemmKind::fprop;
  OperandTally a, b;  // the GEMM's A and B operands (kernels/train/precision_recipe.hpp)
};

class Fp8OperandStats {
 public:
  // The entry of (layer, kind), created on first use in call order.
  GemmOperandTally& entry(const std::string& layer, GemmKind kind);
  const std::vector<GemmOperandTally>& entries() const { return entries_; }
  void add(const Fp8OperandStats& other);  // entry by entry, matched by (layer, kind)

 private:
  std::vector<GemmOperandTally> entries_;
};

// Tallies `q` against `source`, the operand's high-precision values (q.rows x q.cols, row-major).
// `quantizer_input`, when given, is what the quantizer itself read, when that differs from the
// source (DeepSeek-V3's Wgrad re-quantizes an already quantized, dequantized and transposed
// operand): saturation is judged on it; signal, noise and flushes on the source (both roundings).
void tally_operand(const QuantizedTensor& q, std::span<const float> source, OperandTally& tally,
                   std::span<const float> quantizer_input = {});

}  // namespace fp8lab::train
