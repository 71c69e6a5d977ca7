#pragma once
// Which tokens a training step sees, defined so that anyone can reproduce a run from the
// token file alone. A step has `batch` sequences of seq_len + 1 tokens (seq_len inputs, each
// predicting the next). With N tokens in the stream and P = N - seq_len - 1 (the FP8 training
// study's modulus; of the N - seq_len starts that leave a whole sequence, the last is unused):
//   sequential: sequence i of step s (both 0-based) starts at ((s * batch + i) * seq_len) mod P;
//   shuffled:   window w = s * batch + i is window r = w mod M of epoch e = w div M, where
//               M = ceil(P / seq_len) windows start at 0, seq_len, 2 seq_len, ... (all < P);
//               it starts at perm_e(r) * seq_len, perm_e the Fisher-Yates shuffle of 0..M-1
//               driven by std::mt19937_64(seed + e): for k = M-1 down to 1, swap k with
//               j = rng() mod (k + 1). Every epoch visits every window once.
#include <cstdint>
#include <string>
#include <vector>

namespace fp8lab::train {

enum class BatchOrder { sequential, shuffled };
BatchOrder parse_batch_order(const std::string& text);  // throws std::invalid_argument

class BatchSchedule {
 public:
  // Throws std::invalid_argument naming the field: batch or seq_len < 1, or a stream with
  // fewer than batch * seq_len + 2 tokens (one step's sequences would overlap themselves).
  BatchSchedule(std::int64_t stream_tokens, std::int64_t batch, std::int64_t seq_len, BatchOrder order,
                std::uint64_t seed);
  // First token of sequence `index` of `step`.
  std::int64_t start(std::int64_t step, std::int64_t index) const;
  std::int64_t positions() const { return positions_; }  // P

 private:
  const std::vector<std::int64_t>& permutation(std::int64_t epoch) const;

  std::int64_t batch_, seq_len_, positions_, windows_;
  BatchOrder order_;
  std::uint64_t seed_;
  mutable std::int64_t cached_epoch_ = -1;
  mutable std::vector<std::int64_t> cached_permutation_;
};

}  // namespace fp8lab::train
