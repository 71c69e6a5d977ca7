#pragma once
// The gradient of one training step, computed as W simulated data-parallel workers would (for
// gradient compression, one of the seed techniques: harness/train/seed_techniques.hpp), and the
// engine runs it is made of.
//
// The batch's sequences (in batch order) are split into W contiguous shards of batch / W each;
// worker w runs the engine on its shard and forms its mean gradient g_w = fl32(S_w / (batch / W))
// from its double sums S_w. Each worker sends C(g_w) (harness/train/gradient_compression.hpp, with
// its own error-feedback residuals); the "all-reduce" is g = fl32(sum_w decompress(C(g_w)) / W),
// summed in double in worker order. With W = 1 and no compression g = fl32(S / batch), the
// single-worker gradient, bit for bit (the all-reduce is skipped: it would be the identity).
// With W > 1 and no compression g differs from it only by the rounding of the W worker means:
// per element |g - fl32(S / batch)| <= u (mean_w |g_w| + 2 |g|) + O(u^2), u = 2^-24 (each g_w carries
// one rounding, relative u; the all-reduce's double sum is exact to 2^-53; its fl32 and the
// reference's add one each): tested in tests/unit/seed_training_test.cpp.
// The train loss is the sum of the sequences' losses in batch order, whatever W. A delayed-scaling
// recipe's amax histories are shared by the workers (the runner's one DelayedOperandScales): the
// amax all-reduce that Transformer Engine performs across data-parallel ranks.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "harness/train/gradient_compression.hpp"
#include "kernels/memory_ledger.hpp"
#include "kernels/train/activation_policy.hpp"
#include "kernels/train/delayed_operand_scales.hpp"
#include "kernels/train/fp8_operand_stats.hpp"
#include "kernels/train/llama_weights.hpp"
#include "kernels/train/precision_recipe.hpp"
#include "kernels/train/training_step.hpp"

namespace fp8lab::train {

// What every engine run of a step shares.
struct SequenceRunner {
  const ModelConfig* model = nullptr;
  const LlamaWeights* weights = nullptr;
  const std::vector<std::int32_t>* stream = nullptr;
  std::int64_t seq_len = 0;
  double loss_scale = 1;
  const PrecisionRecipe* recipe = nullptr;
  const ActivationPolicy* policy = nullptr;
  MemoryLedger* ledger = nullptr;
  DelayedOperandScales* delayed = nullptr;
  Fp8OperandStats* operand_stats = nullptr;  // optional
};

struct SequenceSums {
  double loss_sum = 0;                       // the sequences' losses, summed in order
  std::vector<NamedGradient> gradient_sums;  // double sums in the engine's tensor order (empty: forward only)
  std::size_t peak_bytes = 0;                // the ledger's peak over the sequences
};

// Runs the engine on each window [start, start + seq_len + 1) in order and sums what it returns;
// forward_only: the losses alone (validation).
SequenceSums run_sequences(const SequenceRunner& runner, std::span<const std::int64_t> starts, bool forward_only = false,
                           double loss_sum_so_far = 0);

struct StepGradient {
  double loss_sum = 0;
  std::size_t peak_bytes = 0;
  std::vector<std::string> names;             // the engine's tensor order
  std::vector<std::vector<float>> gradients;  // the all-reduced mean gradient (FP32)
  double bits_sent_per_worker = 0;            // what one worker sends (mean over the workers)
  double fp32_bits_per_worker = 0;            // 32 x the parameters: an uncompressed FP32 all-reduce
};

// compressors: one per worker (their residuals carry across steps), or empty for no compression.
// Throws std::invalid_argument when workers does not divide the batch.
StepGradient data_parallel_gradient(const SequenceRunner& runner, std::span<const std::int64_t> starts,
                                    std::int64_t workers, std::vector<WorkerCompressor>& compressors, std::int64_t step);

}  // namespace fp8lab::train
