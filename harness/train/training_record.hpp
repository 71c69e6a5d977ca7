#pragma once
// What a training run records for each step, and its flat form for checkpoints.
#include <cstddef>
#include <span>
#include <vector>

#include "kernels/train/fp8_operand_stats.hpp"

namespace fp8lab::train {

struct StepRecord {
  double train_loss = 0, val_loss = 0;  // val_loss NaN where not evaluated
  double grad_norm = 0, lr = 0, loss_scale = 1;
  bool skipped = false;   // the update was not applied (overflow under loss scaling, or divergence)
  bool diverged = false;  // loss or gradient not finite
  double step_seconds = 0, tokens_per_second = 0;
  std::size_t step_peak_bytes = 0;  // the engine's ledger peak over the step's sequences
  // The process's resident-set high-water mark over the step, validation included (reset at the
  // step's start: harness/train/resident_set.hpp); 0 where the OS does not report it.
  std::size_t resident_peak_bytes = 0;
  // The seed techniques (harness/train/seed_techniques.hpp):
  double fp8_flop_fraction = 0;      // of the linear layers' GEMM FLOPs, the share run in an FP8 (or narrower) format
  double gemms_high_precision = 0;   // adaptive precision: (layer, GEMM kind) pairs the controller holds in BF16
  double compression_ratio = 1;      // bits each worker sent / 32 x parameters (1: an FP32 all-reduce)
  double bytes_sent_per_worker = 0;  // what one worker sends for the step's all-reduce
  double update_fraction = 1;        // parameters whose update was applied (sparse updates; 0 on a skipped step)
  double optimizer_flops = 0;        // FLOPs of the optimizer's element loops that ran
  double zero_weight_fraction = 0;   // trained weights exactly 0 after the step (the weight mask's effect)
  // On the steps the run samples (TrainingRunConfig::stats_every): what FP8 quantization did to
  // every FP8 GEMM's operands, summed over the step's sequences; empty on the others.
  std::vector<GemmOperandTally> operand_stats;
};

// Every scalar field as a double, in declaration order (flags as 0/1, bytes exact below 2^53),
// and back (operand_stats travel separately).
inline constexpr std::size_t kStepRecordFields = 18;
std::vector<double> step_record_fields(const StepRecord& record);
StepRecord step_record_from_fields(std::span<const double> fields);  // fields.size() == kStepRecordFields

}  // namespace fp8lab::train
