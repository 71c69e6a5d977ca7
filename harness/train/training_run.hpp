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
#include <filesystem>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "kernels/train/llama_weights.hpp"
#include "harness/train/adamw.hpp"
#include "harness/train/batch_order.hpp"
#include "harness/train/lr_schedule.hpp"
#include "harness/train/run_checkpoint.hpp"
#include "harness/train/seed_techniques.hpp"
#include "harness/train/training_record.hpp"
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
  // What FP8 quantization does to the GEMM operands (harness/train/training_record.hpp
  // operand_stats) on step 0 and every N-th step after it, and the last (0: never). An extra pass
  // over every FP8 operand, counted in step_seconds.
  std::int64_t stats_every = 10;
  // The seed techniques (harness/train/seed_techniques.hpp): simulated data-parallel workers and gradient compression,
  // dynamic sparse updates, adaptive precision scheduling; off by default. With them, step 2-3
  // above runs as harness/train/data_parallel_gradient.hpp says, step 6 as sparse_update.hpp says,
  // and the recipe of each step is the controller's (precision_controller.hpp), `recipe` its base.
  SeedTechniques techniques;

  // Throws std::invalid_argument naming the field (the caller adds the file or flag).
  void validate() const;
  // The same checks but those that depend on the recipe (a study validates its settings before
  // it knows each point's recipe, then every point's run with validate()).
  void validate_settings() const;
  // Every field that shapes the curve, one "name = value" per line (doubles in 17 digits):
  // part of a checkpoint's identity.
  std::string describe() const;
};

struct TrainingRunResult {
  std::vector<StepRecord> steps;
  LlamaWeights final_weights;
  std::size_t parameters = 0;
  std::size_t master_weight_bytes = 0;        // FP32 master weights
  std::size_t optimizer_state_bytes = 0;      // the two moments, in their format
  std::size_t gradient_accumulator_bytes = 0; // the FP32 mean gradient (the double sums counted too; with
                                              // workers or compression also the all-reduce's buffers and
                                              // every simulated worker's error-feedback residuals)
  std::size_t peak_bytes = 0;                 // max step peak + the three above
  std::size_t resident_before_run_bytes = 0;  // the process's resident set as the run began (0: not reported)
  std::int64_t resumed_at_step = 0;           // the first step this call computed (0: a fresh run)
  bool stopped = false;                       // stop_requested ended it early, a checkpoint written
  std::vector<PrecisionSwitch> switches;      // adaptive precision: every switch, in order
  std::size_t error_feedback_bytes_per_worker = 0;  // the residuals one worker keeps (0 without error feedback)
};

// Checkpoints of a run (harness/train/run_checkpoint.hpp). With a file, one is written after
// every `every`-th step (0: never on schedule) and whenever stop_requested() returns true after
// a step (Ctrl-C): the run then returns early with `stopped` set. A run given resume_from skips
// the steps it holds and continues from its state; its result is the whole run's.
struct Checkpointing {
  std::filesystem::path file;
  std::int64_t every = 0;
  std::string identity;  // what the run is (spec, point, inputs); checked on resume by the caller
  const RunCheckpoint* resume_from = nullptr;
  std::function<bool()> stop_requested;
};

// Called after every step with (step index, its record), e.g. for progress.
using StepObserver = std::function<void(std::int64_t, const StepRecord&)>;

// Throws std::invalid_argument for a bad config, a recipe the model cannot run, or a stream
// too short for one batch (naming the field).
// A checkpoint whose tensors do not match the model, or that holds more steps than the run,
// throws CheckpointError naming the field.
TrainingRunResult run_training(const TrainingRunConfig& config, const LlamaWeights& initial, const TokenStream& train,
                               const TokenStream* validation, const StepObserver& observer = {},
                               const Checkpointing& checkpointing = {});

}  // namespace fp8lab::train
