#pragma once
// One training step (forward, next-token cross-entropy, backward) of the Llama model under a
// precision recipe and an activation policy, every buffer through the memory ledger. With a
// shapes-only ledger the very same schedule runs without data or arithmetic and the ledger
// figures are byte-identical to an allocating run's; the report then has no loss or gradients.
//
// This is the engine's API: studies (recompute, loss scaling, training) drive it and turn
// StepReport into their metrics. Gradient errors against the FP64 reference are computed by
// the caller with the metrics module (harness/metrics/train_step_errors.hpp), not here.
#include <array>
#include <cstddef>
#include <string>
#include <vector>

#include "kernels/train/llama_weights.hpp"
#include "kernels/memory_ledger.hpp"
#include "kernels/train/activation_policy.hpp"
#include "kernels/train/attention_kind.hpp"
#include "kernels/train/delayed_operand_scales.hpp"
#include "kernels/train/fp8_operand_stats.hpp"
#include "kernels/train/model_config.hpp"
#include "kernels/train/precision_recipe.hpp"

namespace fp8lab::train {

// What an optimizer keeps beside the step, per parameter, so that the ledger's peak is the whole
// training step's: FP32 master weights (4 bytes, or 0 when the step's own weights are the
// masters) and each AdamW moment (4 FP32, 2 BF16). Allocated at setup in the optimizer_state
// category, live for the whole step. All zero (the default): not counted.
struct OptimizerStateBytes {
  int master_weight = 0, per_moment = 0, moments = 0;
  std::int64_t per_parameter() const { return master_weight + std::int64_t{per_moment} * moments; }
};

struct StepInput {
  ModelConfig model;
  const LlamaWeights* weights = nullptr;  // required unless the ledger is shapes-only
  std::vector<int> tokens;                // T tokens (T >= 2); shapes-only: may be empty, see positions
  std::int64_t positions = 0;             // shapes-only: T
  int element_bytes = 0;                  // shapes-only: counted width of every tensor (0: that of the compute type)
  double loss_scale = 1.0;                // dynamic loss scaling: multiplies dLoss/dlogits (so every gradient);
                                          // the reported loss stays unscaled; finite and > 0
  Fp8OperandStats* operand_stats = nullptr;  // when set, every FP8 GEMM adds what quantization did
                                             // to its operands (kernels/train/fp8_operand_stats.hpp)
  // Delayed-scaling recipes: the scales a run keeps across steps (its caller rolls them after
  // the step). Without it the step is a run's first: every delayed scale is 1.
  DelayedOperandScales* delayed_scales = nullptr;
  // naive (the default, so that every study made before flash keeps its bits and figures) or
  // flash; the policy must have been made for the same kind (make_policy's last argument).
  AttentionKind attention = AttentionKind::naive;
  OptimizerStateBytes optimizer{};  // counted in the ledger when set (shapes-only studies of training memory)
  // Only the loss (a validation pass): no backward, no gradients; the ledger sees the forward's
  // buffers only, as an evaluation would allocate them.
  bool forward_only = false;
};

struct StepReport {
  std::string model, recipe, policy, attention;
  std::int64_t tokens = 0;
  bool shapes_only = false;
  double loss = 0;  // NaN in shapes-only mode
  // Ledger figures over the step (weights allocated first, inside the step).
  std::array<std::size_t, kMemoryCategories> peak_bytes{};
  std::size_t peak_bytes_total = 0;
  std::vector<PhasePeaks> phases;  // setup, forward/L<l>, forward/head, backward/head, backward/L<l>
  std::size_t saved_activation_bytes = 0;           // saved activations live at the end of forward
  std::vector<std::size_t> saved_bytes_per_block;   // what each block added to them
  double activation_bytes_not_kept_fraction = 0;    // 1 - blocks' kept bytes / `none`'s
  double step_flops = 0;                            // forward + backward without policy recompute
  double attention_recompute_flops = 0;             // of which flash backward's recompute of the probabilities
                                                    // (flop_count.hpp; 0 under naive)
  double recompute_flops = 0;
  double recompute_flops_fraction = 0;              // recompute_flops / step_flops
  double layers_recomputed_fraction = 0;            // blocks recomputing anything / blocks
  double layers_fully_recomputed_fraction = 0;      // blocks recomputing everything but x_in / blocks
  double step_seconds = 0, forward_seconds = 0, backward_seconds = 0, recompute_seconds = 0;
};

struct NamedGradient {
  std::string name;  // as ModelWeights::for_each names them
  std::int64_t rows = 0, cols = 0;
  std::vector<double> values;
};

struct StepResult {
  StepReport report;
  std::vector<NamedGradient> gradients;  // empty in shapes-only mode
};

// Throws std::invalid_argument for an invalid model, recipe (validated against the model),
// too few tokens, a token outside the vocabulary, missing weights, or a policy made for
// another model or attention kind.
StepResult run_training_step(const StepInput& input, const PrecisionRecipe& recipe, const ActivationPolicy& policy,
                             MemoryLedger& ledger);

// The checks run_training_step makes first (the same exceptions), for a ledger that allocates
// or not; returns the step's positions T.
std::int64_t check_step_input(const StepInput& input, const PrecisionRecipe& recipe, const ActivationPolicy& policy,
                              bool shapes_only);

}  // namespace fp8lab::train
