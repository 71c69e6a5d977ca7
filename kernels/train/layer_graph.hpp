#pragma once
// What one Llama block saves for its backward pass, and which forward op produces each
// saved tensor from which others: the graph the activation policies, the recompute
// schedule and the FLOP and byte counts all read.
//
//   op          inputs        output   computes
//   norm_att    x_in       -> a        RMSNorm
//   proj_q      a          -> q        a Wq^T, RoPE
//   proj_k      a          -> k        a Wk^T, RoPE
//   proj_v      a          -> v        a Wv^T
//   scores      q, k       -> p        softmax(q k^T / sqrt(hs)), causal, per head
//   attend      p, v       -> o        p v
//   proj_o      o, x_in    -> x_mid    x_in + o Wo^T
//   norm_ffn    x_mid      -> b        RMSNorm
//   proj_1      b          -> h1       b W1^T
//   proj_3      b          -> h3       b W3^T
//   swiglu      h1, h3     -> g        silu(h1) h3
// (proj_2, x_out = x_mid + g W2^T, is the next block's x_in: backward never needs it.)
// Backward reads every one of the twelve saved tensors.
//
// Under attention = flash (attention_kind.hpp) the slot p holds the per-row log-sum-exp L
// (heads x T) instead of the probabilities, and scores and attend are one op with two outputs:
//   flash       q, k, v    -> p (= L), o   FlashAttention-2 forward
// Recomputing either output runs that op, which writes both (recompute_closure couples them);
// its FLOPs are split between p and o as the naive ops' are (the same arithmetic, blockwise).
#include <array>
#include <cstdint>
#include <string_view>

#include "kernels/train/attention_kind.hpp"
#include "kernels/train/model_config.hpp"

namespace fp8lab::train {

enum class Saved { x_in, a, q, k, v, p, o, x_mid, b, h1, h3, g };
inline constexpr int kSavedCount = 12;
const char* saved_name(Saved s);

// rows x cols of a saved tensor for T positions (p is (heads T) x T under naive attention,
// heads x T under flash: the log-sum-exp).
struct Shape {
  std::int64_t rows = 0, cols = 0;
  std::int64_t size() const { return rows * cols; }
};
Shape saved_shape(Saved s, const ModelConfig& c, std::int64_t tokens, AttentionKind attention);

// The producer of s (s != x_in) and its inputs (the first input_count entries are used).
struct Producer {
  const char* op;
  std::array<Saved, 3> inputs;
  int input_count;
};
Producer producer_of(Saved s, AttentionKind attention);

// Forward FLOPs of the op producing s, counted from shapes: a GEMM 2 M N K; the causal
// attention products count the T(T+1)/2 (query, key) pairs actually computed; element-wise
// work at a fixed count per element, stated in flop_count.cpp.
double producer_flops(Saved s, const ModelConfig& c, std::int64_t tokens);

}  // namespace fp8lab::train
