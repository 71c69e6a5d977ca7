#pragma once
// A training run: the engine's step (kernels/train) over batches of a token stream, with
// gradient accumulation, optional global-norm clipping, AdamW on FP32 master weights, a
// learning-rate schedule and, for the fp16 recipe, the dynamic loss scaler.
//
// One step s:
//   1. lr = schedule.at(s).
//   2. For each sequence i = 0 .. batch-1 in order (harness/train/batch_order.hpp): one engine
//      step on its seq_len + 1 tokens (seq_len targets) at the current loss scale; the
//      sequence's gradients (FP32 values, returned as double) are summed in double.
//   3. g = fl32(sum / batch): the gradient of the mean cross-entropy over all batch * seq_len
//      targets (every sequence has seq_len of them); train_loss = the mean of the sequences' losses.
//   4. a recipe with an fp16 GEMM: g unscaled by fl32(1 / scale) with the check for inf/NaN
//      (kernels/cpu/check_finite_and_unscale); an overflow skips the update and backs the scale
//      off (kernels/loss_scaling, PyTorch GradScaler rules). Other recipes: scale 1, and a
//      non-finite gradient is recorded as a divergence, not applied.
//   5. grad_norm = sqrt(sum of g^2 over every tensor, in double, in weight order); with
//      clip > 0 and grad_norm > clip, g *= fl32(clip / (grad_norm + 1e-6)) (torch's
//      clip_grad_norm_, but the norm summed in double rather than per tensor in FP32).
//   6. AdamW (harness/train/adamw.hpp) on every tensor, its step count t = updates applied so far
//      + 1; weight decay on every tensor, or not on the RMSNorm gains (decay_norm_gains = false).
// Everything is in a fixed order, so the same inputs give the same bits at any thread count
// (the engine's own guarantee).
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "data/llama2c_checkpoint.hpp"
#include "harness/train/adamw.hpp"
#include "harness/train/batch_order.hpp"
#include "harness/train/lr_schedule.hpp"
#include "harness/train/token_file.hpp"
#include "kernels/train/attention_kind.hpp"
#include "kernels/train/precision_recipe.hpp"

namespace fp8lab::train {

struct TrainingRunConfig {
  PrecisionRecipe recipe = named_recipe("fp32");  // the loss scaler runs when a GEMM is fp16
  std::string policy = "none";  // activation policy (kernels/train/activation_policy.hpp)
  // Attention as training stacks run it: flash (blockwise, o and the log-sum-exp kept) by
  // default for new runs; naive materialises the probabilities (kernels/train/attention_kind.hpp).
  AttentionKind attention = AttentionKind::flash;
  std::int64_t batch = 1, seq_len = 64, steps = 1;
  BatchOrder order = BatchOrder::sequential;
  std::uint64_t data_seed = 0;  // shuffled order only
  LrSchedule schedule;
  AdamWConfig adamw;
  bool decay_norm_gains = true;  // torch.optim.AdamW given every parameter decays the gains too
  double clip = 0;               // global gradient-norm bound; 0: no clipping
  // Validation loss every N steps and at the last (0: never), over val_sequences windows of the
  // validation stream. It runs the engine's whole step and drops the gradients (the engine has
  // no forward-only entry yet): about 3x a forward's cost, not counted in step_seconds.
  std::int64_t val_every = 0;
  std::int64_t val_sequences = 8;

  // Throws std::invalid_argument naming the field (the caller adds the file or flag).
  void validate() const;
};

struct StepRecord {
  double train_loss = 0, val_loss = 0;  // val_loss NaN where not evaluated
  double grad_norm = 0, lr = 0, loss_scale = 1;
  bool skipped = false;   // the update was not applied (overflow under loss scaling, or divergence)
  bool diverged = false;  // loss or gradient not finite
  double step_seconds = 0, tokens_per_second = 0;
  std::size_t step_peak_bytes = 0;  // the engine's ledger peak over the step's sequences
};

struct TrainingRunResult {
  std::vector<StepRecord> steps;
  LlamaWeights final_weights;
  std::size_t parameters = 0;
  std::size_t master_weight_bytes = 0;        // FP32 master weights
  std::size_t optimizer_state_bytes = 0;      // the two moments, in their format
  std::size_t gradient_accumulator_bytes = 0; // the FP32 mean gradient (the double sums counted too)
  std::size_t peak_bytes = 0;                 // max step peak + the three above
};

// Called after every step with (step index, its record), e.g. for progress.
using StepObserver = std::function<void(std::int64_t, const StepRecord&)>;

// Throws std::invalid_argument for a bad config, a recipe the model cannot run, or a stream
// too short for one batch (naming the field).
TrainingRunResult run_training(const TrainingRunConfig& config, const LlamaWeights& initial, const TokenStream& train,
                               const TokenStream* validation, const StepObserver& observer = {});

}  // namespace fp8lab::train
