#include "harness/train/batch_order.hpp"

#include <random>
#include <stdexcept>
#include <utility>

namespace fp8lab::train {

BatchOrder parse_batch_order(const std::string& text) {
  if (text == "sequential") return BatchOrder::sequential;
  if (text == "shuffled") return BatchOrder::shuffled;
  throw std::invalid_argument("order '" + text + "' is not one of sequential, shuffled");
}

BatchSchedule::BatchSchedule(std::int64_t stream_tokens, std::int64_t batch, std::int64_t seq_len, BatchOrder order,
                             std::uint64_t seed)
    : batch_(batch), seq_len_(seq_len), order_(order), seed_(seed) {
  if (batch < 1 || batch > (1 << 20)) throw std::invalid_argument("batch: must be in 1..2^20, got " + std::to_string(batch));
  if (seq_len < 1 || seq_len > (1 << 20))
    throw std::invalid_argument("seq_len: must be in 1..2^20, got " + std::to_string(seq_len));
  if (stream_tokens > (std::int64_t{1} << 40))
    throw std::invalid_argument("tokens: more than 2^40 tokens in one stream");
  if (stream_tokens < batch * seq_len + 2)
    throw std::invalid_argument("tokens: " + std::to_string(stream_tokens) + " tokens are fewer than one batch needs (batch " +
                                std::to_string(batch) + " x seq_len " + std::to_string(seq_len) + " + 2 = " +
                                std::to_string(batch * seq_len + 2) + ")");
  positions_ = stream_tokens - seq_len - 1;
  windows_ = (positions_ + seq_len - 1) / seq_len;
}

const std::vector<std::int64_t>& BatchSchedule::permutation(std::int64_t epoch) const {
  if (epoch == cached_epoch_) return cached_permutation_;
  std::vector<std::int64_t> p(static_cast<std::size_t>(windows_));
  for (std::int64_t r = 0; r < windows_; ++r) p[static_cast<std::size_t>(r)] = r;
  std::mt19937_64 rng(seed_ + static_cast<std::uint64_t>(epoch));
  for (std::int64_t k = windows_ - 1; k >= 1; --k) {
    const auto j = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(k + 1));
    std::swap(p[static_cast<std::size_t>(k)], p[static_cast<std::size_t>(j)]);
  }
  cached_epoch_ = epoch;
  cached_permutation_ = std::move(p);
  return cached_permutation_;
}

std::int64_t BatchSchedule::start(std::int64_t step, std::int64_t index) const {
  const std::int64_t w = step * batch_ + index;
  if (order_ == BatchOrder::sequential) {
    // (w * seq_len) mod P, w reduced first: (w mod P) * seq_len < 2^40 * 2^20 fits int64.
    return (w % positions_) * seq_len_ % positions_;
  }
  return permutation(w / windows_)[static_cast<std::size_t>(w % windows_)] * seq_len_;
}

}  // namespace fp8lab::train
