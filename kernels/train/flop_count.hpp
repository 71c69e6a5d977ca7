#pragma once
// FLOPs counted from shapes (never estimated from time). Conventions, stated once:
//   GEMM M x N x K: 2 M N K (one multiply and one add per product).
//   RMSNorm: 4 per element (square, sum, scale by r, scale by g); RoPE: 3 per rotated
//   element (two products and one sum per output, over a pair: 6 per 2); softmax: 5 per
//   computed score (scale, max, subtract+exp, sum, divide); SwiGLU: 5 per element
//   (negate, exp, add, divide, multiply); residual add: 1 per element; cross-entropy: 4
//   per logit.
//   Backward of every op: twice its forward (Dgrad + Wgrad for a GEMM; the usual 2x for the
//   element-wise ops, a convention: their real count is within a small factor of it).
// A step without recompute is forward + backward = 3 x forward; recompute adds the forward
// FLOPs of the ops it re-runs.
// Flash attention (attention_kind.hpp) does the same forward arithmetic blockwise (its online
// softmax's rescaling is not counted: the convention's 5 per score stands) and its backward
// recomputes the scores and probabilities of every causal (query, key) pair from q, k and the
// saved log-sum-exp: the q k^T product again (2 hs per pair) plus kFlashRecomputePerScore per
// pair (scale, subtract L, exp). That recompute belongs to the algorithm, not to an activation
// policy, so it is part of the step's FLOPs (StepReport::step_flops, and alone in
// StepReport::attention_recompute_flops), never of recompute_flops: `none` under flash
// recomputes nothing by policy. Naive attention's counts are unchanged.
#include "kernels/train/attention_kind.hpp"
#include "kernels/train/model_config.hpp"

namespace fp8lab::train::flops {

inline constexpr double kRmsnormPerElement = 4, kRopePerElement = 3, kSoftmaxPerScore = 5, kSwigluPerElement = 5,
                        kCrossEntropyPerLogit = 4, kBackwardFactor = 2, kFlashRecomputePerScore = 3;

inline double gemm(double m, double n, double k) { return 2 * m * n * k; }
inline double rmsnorm(double rows, double cols) { return kRmsnormPerElement * rows * cols; }
inline double rope(double rows, double cols) { return kRopePerElement * rows * cols; }

// Forward FLOPs of one block (every op of layer_graph.hpp plus proj_2) and of the head
// (final norm, classifier, loss).
double block_forward(const ModelConfig& c, double tokens);
double head_forward(const ModelConfig& c, double tokens);
// Flash backward's recompute of the probabilities in one block (0 under naive attention).
double attention_backward_recompute(const ModelConfig& c, double tokens, AttentionKind attention);
// Forward + backward of the whole step, without policy recompute (flash's own included).
double step_without_recompute(const ModelConfig& c, double tokens, AttentionKind attention);

}  // namespace fp8lab::train::flops
