#pragma once
// The state of delayed scaling across a training run: one Transformer Engine DelayedScaler per
// FP8 operand (linear layer x GEMM kind x A/B) of the GEMMs a recipe runs with delayed_scaling
// (kernels/train/precision_recipe.hpp).
//
// Within an optimizer step every micro-batch (sequence) quantizes with the scale the history
// gave at the step's start, and the operand's amax over all of them is recorded; roll() then
// appends that amax to the history and sets the next step's scale. (Transformer Engine updates
// once per fp8_autocast forward; fp8lab's step is one optimizer step over its micro-batches,
// so the history holds one entry per optimizer step: the choice gradient accumulation with a
// shared scale implies.)
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "kernels/loss_scaling/delayed_scaling.hpp"
#include "kernels/quantization.hpp"
#include "kernels/train/precision_recipe.hpp"

namespace fp8lab::train {

struct DelayedOperand {
  std::string key;  // "L0.wq fprop a"
  DelayedScaler scaler;
  std::uint32_t step_amax_bits = 0;  // max |x| this step as FP32 bits (NaN the largest: it propagates)
};

class DelayedOperandScales {
 public:
  // The operand's state, created (scale 1, zero history) on first use. References stay valid
  // while later operands are added (a GEMM holds its A's while B's is created).
  DelayedOperand& operand(const std::string& layer, GemmKind kind, char which, const GemmPrecision& precision);
  // After the step: every operand's history takes its step amax; the scales move.
  void roll();
  const std::deque<DelayedOperand>& operands() const { return operands_; }
  // For a checkpoint: restores an operand exactly (its key, history most recent first, scale).
  void restore(const std::string& key, const DelayedScalingConfig& config, std::span<const float> history, float scale);

 private:
  std::deque<DelayedOperand> operands_;
};

// Quantizes x (rows x cols) with one per-tensor scale from `operand`: q = satfinite(x * scale),
// the stored tile scale sf = fl32(1 / scale) (TE's scale_inv); records max |x| into the step amax.
QuantizedTensor quantize_delayed(std::span<const float> x, std::int64_t rows, std::int64_t cols, Fp8Format format,
                                 DelayedOperand& operand);

}  // namespace fp8lab::train
