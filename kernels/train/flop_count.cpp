#include "kernels/train/flop_count.hpp"

#include "kernels/train/layer_graph.hpp"

namespace fp8lab::train::flops {

double block_forward(const ModelConfig& c, double tokens) {
  double sum = gemm(tokens, c.dim, c.hidden) + tokens * c.dim;  // proj_2 and its residual add
  for (int s = 1; s < kSavedCount; ++s) sum += producer_flops(static_cast<Saved>(s), c, static_cast<std::int64_t>(tokens));
  return sum;
}

double head_forward(const ModelConfig& c, double tokens) {
  return rmsnorm(tokens, c.dim) + gemm(tokens, c.vocab, c.dim) + kCrossEntropyPerLogit * tokens * c.vocab;
}

double attention_backward_recompute(const ModelConfig& c, double tokens, AttentionKind attention) {
  if (attention == AttentionKind::naive) return 0;
  const double pairs = static_cast<double>(c.heads) * tokens * (tokens + 1) / 2;
  return 2 * pairs * c.head_size() + kFlashRecomputePerScore * pairs;
}

double step_without_recompute(const ModelConfig& c, double tokens, AttentionKind attention) {
  return (1 + kBackwardFactor) * (c.layers * block_forward(c, tokens) + head_forward(c, tokens)) +
         c.layers * attention_backward_recompute(c, tokens, attention);
}

}  // namespace fp8lab::train::flops
