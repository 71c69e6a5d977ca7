#pragma once
// Blockwise (FlashAttention-2) causal attention with grouped-query heads, in the step's compute
// precision Real, for the training step's `attention = flash` (attention_kind.hpp).
//
// Contract. q: T x (heads hs), k, v: T x (kv_heads hs), head h reads kv head g = h / group
// (group = heads / kv_heads), scores s = q_h k_g^T / sqrt(hs), causal (key u <= query t).
//   forward   o_h = softmax(s) v_g, and L(h, t) = m + log(l): the row's max scaled score m and
//             its sum of exp(s - m) l, so that p(t, u) = exp(s(t, u) - L(h, t)).
//             Query rows go in blocks of kFlashBlock; for each, the key blocks (kFlashBlock keys)
//             up to the diagonal run in ascending order with the online-softmax update
//               m' = max(m, max_u s_u), l' = l exp(m - m') + sum_u exp(s_u - m'),
//               o' = o exp(m - m') + sum_u exp(s_u - m') v_u,
//             and o / l, L = m + log(l) after the last block.
//   backward  D(h, t) = sum_i dO(t, i) O(t, i); per (query block, key block), recomputed
//             s = q k^T / sqrt(hs) and p = exp(s - L), then dv += p^T dO; dp = dO v^T;
//             ds = p (dp - D) / sqrt(hs); dq += ds k; dk += ds^T q.
// exp: kernels/train/exp_f32.hpp in FP32 (within 1 ulp; glibc's scalar expf was the step's
// largest cost), std::exp in FP64.
// Order. Every sum runs in a fixed order that depends on neither the thread count nor the
// machine: a score's dot product over i ascending; o's sum over key blocks ascending and, in a
// block, keys ascending; dq over keys ascending; dk and dv over the group's heads in order, then
// queries ascending. Threads take whole heads (forward) or whole kv heads (backward, whose heads
// accumulate into the same dk, dv columns), so the same inputs give the same bits on any number
// of threads. Independent sums run side by side so that they vectorize, as in forward_ops.cpp.
// Memory. No T x T buffer: the caller allocates (through the memory ledger) a workspace of
// flash_*_lane_elements(hs) elements per lane, one lane per head (forward) or kv head
// (backward), with rows = lanes; backward also takes D, heads x T. Everything else is the
// operands and outputs.
#include <cstdint>

#include "kernels/train/tensor.hpp"

namespace fp8lab::train {

// Query rows and key columns per tile: FlashAttention-2's usual tile edge for head sizes up to
// 128 (the block size fixes the online softmax's order, so it is part of the bits).
inline constexpr std::int64_t kFlashBlock = 64;
// Below this many positions the heads run on one thread: a thread team's start would cost more
// than the work (stories260K's 256 positions repay it). Bits do not depend on it.
inline constexpr std::int64_t kFlashParallelMinPositions = 128;

// Workspace per lane: forward a transposed key block (hs x block), a block x block tile of scores
// and the running max and sum of a query block; backward transposed key and value blocks and two
// block x block tiles (probabilities, then dp / ds).
std::int64_t flash_forward_lane_elements(std::int64_t head_size);
std::int64_t flash_backward_lane_elements(std::int64_t head_size);

// o: T x (heads hs), lse: heads x T (written); workspace: heads x flash_forward_lane_elements(hs).
template <class Real>
void flash_attention_forward(const Tensor<Real>& q, const Tensor<Real>& k, const Tensor<Real>& v, int heads,
                             int kv_heads, Tensor<Real>& o, Tensor<Real>& lse, Tensor<Real>& workspace);

// dq, dk, dv written (as attention_backward); delta: heads x T (D, written);
// workspace: kv_heads x flash_backward_lane_elements(hs).
template <class Real>
void flash_attention_backward(const Tensor<Real>& q, const Tensor<Real>& k, const Tensor<Real>& v, const Tensor<Real>& o,
                              const Tensor<Real>& lse, const Tensor<Real>& d_o, int heads, int kv_heads, Tensor<Real>& dq,
                              Tensor<Real>& dk, Tensor<Real>& dv, Tensor<Real>& delta, Tensor<Real>& workspace);

}  // namespace fp8lab::train
