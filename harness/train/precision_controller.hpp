#pragma once
// An adaptive precision scheduler (a seed technique, harness/train/seed_techniques.hpp): on every
// `every`-th step it reads one statistic of each linear layer's GEMMs and moves each (layer, GEMM
// kind) between its FP8 base recipe and a high precision (BF16 unless told otherwise). A
// hysteresis band and a patience keep a statistic that hovers near a threshold from flipping a
// GEMM back and forth; every switch is logged.
//
// Where the statistic comes from: on a due step the training loop runs a probe pass under the
// all-FP8 base recipe and hands its tallies (kernels/train/fp8_operand_stats.hpp) to observe(), so
// a GEMM now in high precision is still measured as it would be in FP8, which is what deciding
// its way back needs.
//
// Statistics, with the operands of kernels/train/precision_recipe.hpp (Fprop A = X, B = W;
// Dgrad A = dY, B = W^T; Wgrad A = dY^T, B = X^T):
//   sqnr        min(SQNR_A, SQNR_B) in dB: the worse-quantized operand bounds the product's error.
//               Low is bad:  to high precision when  < band_low,  back to FP8 when  > band_high.
//   grad_noise  sqrt(noise / signal) of the gradient operand, A in Dgrad (dY) and Wgrad (dY^T):
//               the RMS error quantization put into the gradient relative to its RMS.
//               High is bad: to high precision when  > band_high, back to FP8 when  < band_low.
//               Fprop has no gradient operand: under grad_noise it is never evaluated and stays in
//               the base recipe's precision (nothing measured about it could justify a move).
// A value equal to a threshold is inside the band. SQNR +inf (no noise) counts as good.
//
// Hysteresis, per (layer, kind): an evaluation on the side that leaves the current precision adds
// one to the GEMM's streak; `patience` in a row switch it and restart the streak at 0; an
// evaluation inside the band or on the staying side resets the streak to 0. A GEMM without a
// measurement on a due step (absent from the tallies, or NaN: no elements, 0/0) is not evaluated
// and keeps its streak. Never switched: a (layer, kind) whose base recipe GEMM is not FP8
// (deepseek_v3's and fp8_delayed's classifier run in BF16), and Fprop under grad_noise.
//
// current() is the base recipe (its overrides kept) plus, appended so that they win, one
// LayerOverride per layer with a kind in high precision, setting those kinds only. One repair
// keeps it valid: a Wgrad that re-quantizes the FP8 copies of Fprop's X and Dgrad's dY
// (requantize_transposed, deepseek_v3) has no such copy to re-quantize when either of those two
// runs in high precision; it then stays FP8 but quantizes X^T and dY^T from their high-precision
// values (requantize_transposed off, one rounding instead of two). The probe still measures the
// re-quantized Wgrad, an upper bound on the repaired one's noise.
//
// Deterministic: GEMMs are evaluated in the order of the layer list and fprop, dgrad, wgrad, and
// the log records switches in that order within a step. No randomness.
#include <cstdint>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernels/train/fp8_operand_stats.hpp"
#include "kernels/train/model_config.hpp"
#include "kernels/train/precision_recipe.hpp"

namespace fp8lab::train {

struct PrecisionControllerConfig {
  enum class Statistic { sqnr, grad_noise };

  std::int64_t every = 1;  // evaluate on steps s >= 0 with s % every == 0
  Statistic statistic = Statistic::sqnr;
  // The hysteresis band [band_low, band_high], in dB for sqnr, a plain ratio for grad_noise; which
  // edge sends a GEMM which way is in the table above. No defaults: they are a study's choice.
  double band_low = std::numeric_limits<double>::quiet_NaN();
  double band_high = std::numeric_limits<double>::quiet_NaN();
  int patience = 1;  // consecutive evaluations on the leaving side before a switch

  // Throws std::invalid_argument whose message starts with the spec field: adaptive_every < 1,
  // adaptive_statistic not a known one, adaptive_low / adaptive_high not finite, adaptive_low not
  // below adaptive_high, adaptive_low < 0 under grad_noise (a ratio of norms), adaptive_patience < 1.
  void validate() const;
};

const char* adaptive_statistic_name(PrecisionControllerConfig::Statistic statistic);
// "sqnr" or "grad_noise"; throws std::invalid_argument starting "adaptive_statistic:".
PrecisionControllerConfig::Statistic parse_adaptive_statistic(const std::string& text);

// The statistic of one GEMM's tally (the table above); NaN when it cannot be measured (an operand
// without elements, 0/0, Fprop under grad_noise).
double gemm_statistic(PrecisionControllerConfig::Statistic statistic, const GemmOperandTally& tally);

// FLOPs of the linear-layer GEMMs that run in FP8 under `recipe`, over those of all linear-layer
// GEMMs, for a step of `tokens` tokens. A linear layer out x in costs 2 T out in per GEMM (Fprop
// T x out x in, Dgrad T x in x out, Wgrad out x in x T: equal). Shapes: wq, wo dim x dim; wk, wv
// kv_dim x dim; w1, w3 hidden x dim; w2 dim x hidden; classifier vocab x dim. Attention's q k^T
// and p v products are no linear layers (no weights, not run by the recipe's GEMMs): in neither
// sum; nor are the element-wise ops. Throws std::invalid_argument for tokens < 1, an invalid
// model, or a recipe that does not validate against it (e.g. a layer the model lacks).
double fp8_flop_fraction(const PrecisionRecipe& recipe, const ModelConfig& model, std::int64_t tokens);

struct PrecisionSwitch {
  std::int64_t step = 0;
  std::string layer;
  GemmKind kind = GemmKind::fprop;
  double statistic = 0;  // the value of the evaluation that completed the streak
  bool to_fp8 = false;   // false: FP8 -> high precision
};

// The controller's state as numbers, for a checkpoint. GEMM index g = 3 l + k: layer l of the
// controller's list, k = 0, 1, 2 for fprop, dgrad, wgrad. The switch log is part of it so that a
// resumed run's log is the uninterrupted run's.
struct PrecisionControllerState {
  struct Switch {
    std::int64_t step = 0, gemm = 0;
    double statistic = 0;
    std::int64_t to_fp8 = 0;  // 0 or 1
    bool operator==(const Switch&) const = default;
  };
  std::int64_t last_step = -1;       // the last step observed; -1 before the first
  std::vector<std::int64_t> high;    // per g: 1 when the GEMM runs in high precision now, else 0
  std::vector<std::int64_t> streak;  // per g: consecutive evaluations on the leaving side
  std::vector<Switch> switches;      // the log, in order
  bool operator==(const PrecisionControllerState&) const = default;
};

class PrecisionController {
 public:
  // `layers`: the model's linear layers as recipes name them (linear_layer_names). `high`: what a
  // GEMM leaving FP8 runs in; bf16, fp16 or fp32 (fp64 cannot mix with the others in one step).
  // Throws std::invalid_argument for an invalid config, an empty or repeated layer list, or a
  // `high` of another kind.
  PrecisionController(PrecisionControllerConfig config, PrecisionRecipe base, std::vector<std::string> layers,
                      GemmPrecision high = GemmPrecision::plain(GemmPrecision::Kind::bf16));

  bool due(std::int64_t step) const { return step >= 0 && step % config_.every == 0; }

  // One evaluation from the probe pass of a due step. Throws std::invalid_argument for a step not
  // due or not after the last one observed, a tally of a layer not in the list, or two tallies of
  // the same (layer, kind); nothing changes then.
  void observe(std::int64_t step, const std::vector<GemmOperandTally>& tallies);

  PrecisionRecipe current() const;
  bool in_high_precision(const std::string& layer, GemmKind kind) const;  // throws for an unknown layer
  const std::vector<PrecisionSwitch>& switches() const { return switches_; }

  // The free fp8_flop_fraction above, of current(); also throws when the model lacks a layer the
  // controller schedules.
  double fp8_flop_fraction(const ModelConfig& model, std::int64_t tokens) const;

  PrecisionControllerState state() const;
  // Throws std::invalid_argument (nothing changes then) for a state that does not fit this
  // controller: vector sizes other than 3 x layers, flags other than 0/1, high precision on a GEMM
  // that is never switched, a streak outside [0, patience), a last step not due, a log entry that
  // names no GEMM or comes after the last step.
  void restore(const PrecisionControllerState& state);

 private:
  struct Gemm {
    bool switchable = false;  // FP8 in the base recipe and evaluated by the statistic
    bool high = false;
    std::int64_t streak = 0;
  };
  std::size_t layer_index(const std::string& layer) const;  // throws for an unknown layer

  PrecisionControllerConfig config_;
  PrecisionRecipe base_;
  std::vector<std::string> layers_;
  GemmPrecision high_;
  std::unordered_map<std::string, std::size_t> index_;  // layer name -> position in layers_
  std::vector<Gemm> gemms_;                             // 3 per layer, fprop, dgrad, wgrad
  std::int64_t last_step_ = -1;
  std::vector<PrecisionSwitch> switches_;
};

}  // namespace fp8lab::train
