#pragma once
// Dynamic sparse updates (one of the seed techniques, harness/train/seed_techniques.hpp): per
// step and per tensor, only the parameters with the largest gradient magnitudes are updated; the
// others are frozen for the step.
//
// Selection: the k = topk_count(n, ratio) (about ceil(ratio * n)) elements of largest |g| of an
// n-element tensor are selected, as top-k gradient compression selects them
// (harness/train/gradient_compression.hpp): the per-tensor quantile 1 - ratio of |g|, made exact,
// ties broken towards the lower index, so exactly k are chosen whatever the values. A NaN gradient
// never reaches here (a step whose gradient is not finite is not applied).
//
// Two modes, both configured by `ratio`:
//   gradient     the selected elements get AdamW's update; the frozen ones keep their value (no
//                weight decay either) and, with frozen_momentum, their moments still absorb their
//                gradient (harness/train/adamw.hpp UpdateMask); without it their moments stay as
//                they were. The optimizer FLOPs saved are the frozen elements' element-loop FLOPs
//                (kAdamWFlopsPerElement each; with frozen_momentum the moment updates still run,
//                so only the parameter update's share is saved: the count is stated where it is
//                computed).
//   weight_mask  what the articles' code does: a full AdamW update of every element, then the
//                weights whose gradient is not selected are multiplied by 0. That is not a sparse
//                update: it zeroes those weights (pruning by gradient magnitude), every step, and a
//                zeroed weight only comes back if a later step's update moves it before the mask
//                zeroes it again. No optimizer FLOPs are saved; the fraction of weights that are
//                zero after each step is recorded.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace fp8lab::train {

enum class SparseMode { off, gradient, weight_mask };
SparseMode parse_sparse_mode(const std::string& text);  // throws std::invalid_argument naming sparse_update
const char* sparse_mode_name(SparseMode mode);

struct SparseUpdateConfig {
  SparseMode mode = SparseMode::off;
  double ratio = 1.0;           // fraction of each tensor's elements selected, in (0, 1]
  bool frozen_momentum = false; // gradient mode: the frozen elements' moments still track their gradient

  // Throws std::invalid_argument naming the field (sparse_ratio, sparse_frozen_momentum).
  void validate() const;
};

// 1 for the topk_count(n, ratio) elements of largest |gradient| (ties: the lower index), else 0.
std::vector<std::uint8_t> select_largest_magnitudes(std::span<const float> gradient, double ratio);

// weight_mask mode: weights[i] *= 0 where selected[i] == 0. Returns how many weights are zero after.
std::size_t multiply_by_mask(std::span<float> weights, std::span<const std::uint8_t> selected);

}  // namespace fp8lab::train
