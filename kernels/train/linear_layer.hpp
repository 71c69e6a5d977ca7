#pragma once
// One linear layer's three GEMMs under a precision recipe, on row-major memory the caller owns:
// what fp8lab.torch runs for a converted torch.nn.Linear. Each call is the engine's own
// (linear_gemm.hpp: fprop, dgrad, wgrad with the layer's resolved GemmPrecision), so a recipe means
// the same bits in the engine and in PyTorch.
//   Fprop  Y  = X W^T   X: m x k (tokens x in), W: n x k (out x in), Y: m x n
//   Dgrad  dX = dY W    dY: m x n, dX: m x k
//   Wgrad  dW = dY^T X  dW: n x k
// Real is float, or double under an FP64 recipe (whose step computes in FP64 throughout).
//
// What backward needs of X: under a recipe whose Wgrad re-quantizes X's Fprop quantization
// (requantize_transposed, DeepSeek-V3's), the FP8 codes and scales Fprop made (keeps_x_fp8();
// fprop() hands them out and wgrad() takes them), else X itself.
//
// Delayed scaling (Transformer Engine's DelayedScaling): the layer keeps each operand's amax history
// and rolls it at the first Fprop after a Wgrad, so one history entry per forward-backward pass (a
// checkpointed Fprop recomputed in backward records again, into the same entry: the same values, the
// same maximum). An Fprop that does not train (set_recording(false): torch's no_grad, validation)
// reads the scales and records nothing, as the engine's validation does.
// Empty shapes (m, n or k = 0) give zeros, as torch's matmul does.
//
// A GemmRecord, when given, receives what quantization did to the GEMM's operands (the engine's
// tally: SQNR, saturated and flushed counts, kernels/train/fp8_operand_stats.hpp, and their ranges:
// amax, scale extremes): fp8 GEMMs only, the same bits computed either way.
//
// A bias (nn.Linear's; the engine's model has none) is added to the GEMM's output, one rounding
// per element, and its gradient is each column of dY summed in FP64 in order of rows, rounded
// once: the same bits on any thread count, in eager and compiled graphs alike.
#include <cstdint>
#include <mutex>
#include <string>

#include "kernels/train/delayed_operand_scales.hpp"
#include "kernels/train/fp8_operand_stats.hpp"
#include "kernels/train/precision_recipe.hpp"

namespace fp8lab::train {

struct GemmRecord {
  GemmOperandTally tally;
  GemmOperandRanges ranges;
};

class LinearLayer {
 public:
  // The recipe's three GEMMs for `layer` (its overrides resolved by that name).
  LinearLayer(const PrecisionRecipe& recipe, std::string layer);

  const std::string& layer() const { return layer_; }
  const std::string& recipe() const { return recipe_; }
  // Whether the next GEMMs record their operands' amax into the delayed-scaling history (default
  // true); false for passes that do not train.
  void set_recording(bool recording) { recording_ = recording; }
  const GemmPrecision& precision(GemmKind kind) const;
  bool fp64() const { return fp64_; }
  bool keeps_x_fp8() const;
  QuantizeConfig x_fp8_config() const;  // Fprop's A quantization: what is kept when keeps_x_fp8()

  // x_fp8: when keeps_x_fp8(), receives X as Fprop quantized it (else untouched).
  // bias: n values or nullptr.
  template <class Real>
  void fprop(const Real* x, std::int64_t m, std::int64_t k, const Real* w, std::int64_t n, const Real* bias, Real* y,
             QuantizedTensor* x_fp8 = nullptr, GemmRecord* record = nullptr);
  template <class Real>
  void dgrad(const Real* dy, std::int64_t m, std::int64_t n, const Real* w, std::int64_t k, Real* dx,
             GemmRecord* record = nullptr);
  template <class Real>
  void wgrad(const Real* dy, std::int64_t m, std::int64_t n, const Real* x, std::int64_t k, Real* dw,
             GemmRecord* record = nullptr);
  // The re-quantizing Wgrad from X's Fprop quantization (keeps_x_fp8()); x_source: X itself, which
  // a record measures against (nullptr: the record keeps no operand figures).
  void wgrad(const float* dy, std::int64_t m, std::int64_t n, const QuantizedTensor& x_fp8, float* dw,
             GemmRecord* record = nullptr, const float* x_source = nullptr);
  // The bias gradient: db[j] = sum over rows i of dY[i][j] (dY: m x n).
  template <class Real>
  static void bias_grad(const Real* dy, std::int64_t m, std::int64_t n, Real* db);

 private:
  struct Call;
  template <class Real>
  void fprop_gemm(const Real* x, std::int64_t m, std::int64_t k, const Real* w, std::int64_t n, Real* y,
                  QuantizedTensor* x_fp8, GemmRecord* record);
  std::string layer_, recipe_;
  GemmPrecision fprop_, dgrad_, wgrad_;
  bool fp64_ = false;
  std::mutex delayed_mutex_;  // the delayed-scaling state below, when the recipe has it
  DelayedOperandScales delayed_;
  bool wgrad_since_roll_ = false;  // a Wgrad ran since the last roll: the next Fprop starts a new entry
  bool recording_ = true;
};

}  // namespace fp8lab::train
