#pragma once
// What FP8 quantization did to the operands of a step's GEMMs, per linear layer and GEMM kind:
// signal and noise energy (SQNR = 10 log10(signal / noise)), and counts of the elements the
// quantizer saturated and flushed to zero. The engine tallies them when a StepInput asks
// (kernels/train/training_step.hpp); the training loop passes one to all of a step's sequences,
// so the sums run over the step.
//
// Per element x of an operand, with its tile's scale sf and dequantized value x' = fl32(q sf):
//   signal += x^2, noise += (x - x')^2      in double, in element order
//   saturated: round-to-nearest-even of the scaled value fl32(x * m) without the clamp leaves
//              the format's range, so satfinite clipped it (a value that merely rounds down to
//              fmt_max is not counted; the tie above fmt_max is clipped in E5M2, whose fmt_max
//              has an odd significand, and not in E4M3; in the MX/NVFP4 element formats, whose
//              largest value has an odd significand too, from the tie on: 7 for E2M1, 30 for
//              E3M2, 7.75 for E2M3). m is the factor the quantizer multiplied by: delayed
//              scaling's own scale (passed in), else fl32(1 / sf) (for the two-level nvfp4 rules
//              fl32(1 / fl32(s_b * decode)), within a few ulps of the quantizer's), which is the
//              factor of the fp32 / pow2 / deepgemm rules and within an ulp of the te and div
//              rules' (so their counts can differ at the boundary). NaN and inf values, and a
//              non-finite factor, count as no clip.
//   flushed:   x != 0 and x' == 0 (below half the smallest subnormal times sf)
// A recomputed Fprop (activation policies) tallies its operands again: the same values twice,
// which leaves SQNR and the fractions unchanged.
#include <cstdint>
#include <deque>
#include <limits>
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
  // The entry of (layer, kind), created on first use in call order; references stay valid while
  // later entries are added.
  GemmOperandTally& entry(const std::string& layer, GemmKind kind);
  std::vector<GemmOperandTally> entries() const { return {entries_.begin(), entries_.end()}; }

 private:
  std::deque<GemmOperandTally> entries_;
};

// The range of an operand and of its scales, for fp8lab.torch's recorder: max |x| over the
// operand's values, and the smallest and largest scale in effect over its tiles (the tile scale
// times the per-tensor decode factor of the two-level rules). add() takes the extremes of both.
struct OperandRange {
  double amax = 0;
  double scale_min = std::numeric_limits<double>::infinity(), scale_max = 0;
  void add(const OperandRange& other);
};
struct GemmOperandRanges {
  OperandRange a, b;
};
OperandRange operand_range(const QuantizedTensor& q, std::span<const float> source);

// Tallies `q` against `source`, the operand's high-precision values (q.rows x q.cols, row-major).
// `quantizer_input`, when given, is what the quantizer itself read, when that differs from the
// source (DeepSeek-V3's Wgrad re-quantizes an already quantized, dequantized and transposed
// operand): saturation is judged on it; signal, noise and flushes on the source (both roundings).
// multiplier > 0: the factor the quantizer scaled every element with (delayed scaling).
void tally_operand(const QuantizedTensor& q, std::span<const float> source, OperandTally& tally,
                   std::span<const float> quantizer_input = {}, float multiplier = 0);

}  // namespace fp8lab::train
