#pragma once
// A training run's checkpoint: everything the next step depends on, so that a run resumed from
// it continues to the very curve an uninterrupted run draws (bit for bit):
//   - the FP32 master weights and both AdamW moments of every tensor (in their storage format:
//     a BF16 moment is stored as the FP32 value of its BF16 bits, which reads back exactly);
//   - the optimizer's update count (AdamW's bias correction) and the loss scaler's state;
//   - the data position, which is the next step's index: the batch order, the learning rate
//     and the validation cadence are functions of the step (harness/train/batch_order.hpp);
//   - the records of the steps done, so the resumed run's result holds the whole curve;
//   - the seed techniques' state: the adaptive precision controller's (precisions, streaks, switch
//     log) and each simulated worker's error-feedback residuals;
//   - an identity text (the run's spec, point and inputs) that a resume must match.
//
// File layout (little-endian, written by this project only, so no foreign reader to serve):
//   "FP8LABCK" u32 version | str identity | i64 next_step, updates | str scaler_state |
//   u64 records, each: kStepRecordFields x f64, u64 tallies, each: str layer, u8 kind, 2 x (2 x f64, 3 x i64) |
//   u64 tensors, each: str name, u64 count, f32[count] weights,
//   f32[count] m, f32[count] v | u64 delayed operands, each: str key, u8 format, i64 history
//   length, u8 reduction, i32 margin, f32[length] history, f32 scale | u8 has_controller, then when 1:
//   i64 last_step, u64 gemms, i64[gemms] high, i64[gemms] streak, u64 switches, each: i64 step,
//   i64 gemm, f64 statistic, i64 to_fp8 | u64 workers, each: u64 tensors, each: u64 count,
//   f32[count] residual | the SHA-256 (32 bytes) of everything before it.
// str = u64 length + bytes. The trailing hash turns a truncated or damaged file into an error
// rather than a silently different run.
//
// Written atomically: to FILE.tmp, fsync'd, renamed over FILE, the folder fsync'd; a run killed
// at any instant leaves the previous checkpoint or the new one, never half of one.
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness/train/precision_controller.hpp"
#include "harness/train/training_record.hpp"
#include "kernels/loss_scaling/delayed_scaling.hpp"
#include "kernels/loss_scaling/loss_scaler_state.hpp"

namespace fp8lab::train {

struct TensorState {
  std::string name;  // as the engine names it ("embedding", "L0.wq", ...)
  std::vector<float> weights, m, v;
};

// One operand's delayed-scaling state (kernels/train/delayed_operand_scales.hpp).
struct DelayedOperandState {
  std::string key;
  DelayedScalingConfig config;
  std::vector<float> history;  // most recent first
  float scale = 1;
};

// The compiler, its flags and the -march of this fp8lab (harness/runtime/build_info.hpp); see build_mismatch.
std::string this_build();

struct RunCheckpoint {
  std::string identity;
  std::string build = this_build();  // the fp8lab build that wrote it (this_build() of that build)
  std::int64_t next_step = 0;  // steps done
  std::int64_t updates = 0;    // AdamW updates applied (skipped steps apply none)
  LossScalerState scaler;
  std::vector<StepRecord> records;  // one per step done
  std::vector<TensorState> tensors;
  std::vector<DelayedOperandState> delayed;  // delayed-scaling recipes only
  std::optional<PrecisionControllerState> controller;         // adaptive precision runs only
  std::vector<std::vector<std::vector<float>>> residuals;    // error feedback: per worker, per tensor
};

// "checkpoint FILE: field 'F': what is wrong": a checkpoint that cannot be read, or one that
// belongs to another run. Exit 2 like every other bad input.
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The compiler, its flags and the -march of this fp8lab (harness/runtime/build_info.hpp): a resume by
// another build gives the bit-identical curve only where both builds compute the same bits,
// which tests/portable/cross_target_test.sh checks for x86-64-v2, x86-64-v3 and the scalar
// kernels of one compiler, so a different build is reported (build_mismatch), not refused.
// Empty when `checkpoint` was written by this build, else one line saying how the builds differ.
std::string build_mismatch(const RunCheckpoint& checkpoint);

// Throws CheckpointError when the file or its folder cannot be written.
void write_checkpoint(const std::filesystem::path& file, const RunCheckpoint& checkpoint);
// Throws CheckpointError naming the file and the field: missing, truncated, damaged (hash),
// another version, or malformed.
RunCheckpoint read_checkpoint(const std::filesystem::path& file);
// Throws CheckpointError naming the file and field 'identity' when `checkpoint` is another
// run's, quoting the first line where the two identities differ.
void require_identity(const std::filesystem::path& file, const RunCheckpoint& checkpoint, const std::string& identity);

}  // namespace fp8lab::train
