#pragma once
// Activation policies: for every block and every saved tensor of layer_graph.hpp, whether
// backward gets it kept (in the compute precision), kept in FP8 (E4M3, 1x128 tiles, FP32
// scales, dequantized when backward reads it: an error source of its own), or recomputed in
// backward from what is kept (the closure of producers, run in forward order).
//
// Named policies (spec strings):
//   none        keep everything
//   full        keep each block's input x_in only, recompute the rest of the block
//   selective   Megatron's selective recompute: recompute the attention probabilities p
//               from the kept q, k (core attention); keep everything else. Under flash
//               attention the probabilities are never stored (backward recomputes them
//               block by block, counted in the step's FLOPs, not here), so nothing is left for
//               selective to drop: it keeps everything, as none does (Megatron likewise skips
//               core-attention recompute when flash attention is on)
//   deepseek    DeepSeek-V3: recompute the RMSNorm outputs a, b and the SwiGLU output g;
//               cache the attention output o and the SwiGLU inputs h1, h3 in FP8
//   layers:r    the first round(r L) blocks `full`, the others `none` (Megatron's
//               recompute_num_layers with the block method, XTuner's recompute_ratio), r in [0, 1]
//   budget:f    keep at most a fraction f in [0, 1] of `none`'s activation bytes: greedily
//               drop the (block, tensor) with the most bytes saved per FLOP of recompute it
//               adds (the closure's marginal forward FLOPs; ties to the earlier block and
//               tensor), until the kept bytes fit or only the x_in are left (PyTorch's
//               activation_memory_budget in spirit; its min-cut solver is not reproduced)
//   slices:S    tensor-slice recompute: the token-wise MLP part (b, h1, h3, g) is dropped and,
//               in backward, recomputed and back-propagated one slice of T / S positions at a
//               time, so only one slice's MLP intermediates are live; attention keeps
//               x_in, a, q, k, v, p, o and x_mid whole (it mixes positions). S must divide T.
//   tensors:t=k,...  per saved tensor, the same in every block: t one of a q k v p o x_mid b
//               h1 h3 g, k one of keep, fp8, recompute (unnamed tensors are kept), e.g.
//               tensors:p=recompute,o=fp8; under flash, p is the log-sum-exp (also named lse)
//
// Under flash attention (attention_kind.hpp) the slot p holds the log-sum-exp L, heads x T,
// and every policy above means the same thing with that slot: `full` and `layers:r` drop L
// with the rest, `budget:f` weighs L's (small) bytes against the flash forward it costs to
// recompute, `deepseek` and `slices:S` keep it. Dropping either of p (L) and o recomputes the
// flash forward, which writes both; backward reads a kept (or FP8) one where there is one.
#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/train/layer_graph.hpp"
#include "kernels/train/model_config.hpp"

namespace fp8lab::train {

enum class Keep { keep, fp8, recompute };
const char* keep_name(Keep k);

struct BlockPlan {
  std::array<Keep, kSavedCount> saved{};  // all keep
  Keep& operator[](Saved s) { return saved[static_cast<std::size_t>(s)]; }
  Keep operator[](Saved s) const { return saved[static_cast<std::size_t>(s)]; }
  bool any_recompute() const;
  bool fully_recomputed() const;  // every tensor but x_in recomputed
};

struct ActivationPolicy {
  std::string spec;  // as given, e.g. "budget:0.3"
  std::vector<BlockPlan> blocks;
  int slices = 0;  // > 0 for slices:S
  AttentionKind attention = AttentionKind::naive;  // what the plans were made for (the step checks it)
};

// element_bytes: width of a kept activation (budget:f weighs bytes with it).
// Throws std::invalid_argument naming what is wrong: an unknown name, r or f outside [0, 1]
// or not a number, S not a positive divisor of tokens, an unknown tensor or keep mode.
// attention: the step's attention kind (the saved p and what selective drops depend on it).
ActivationPolicy make_policy(std::string_view spec, const ModelConfig& model, std::int64_t tokens, int element_bytes,
                             AttentionKind attention = AttentionKind::naive);

// Bytes a saved tensor occupies under `keep` (0 for recompute): FP8 is one byte per element
// plus one FP32 scale per 1x128 tile.
std::int64_t kept_bytes(Saved s, Keep keep, const ModelConfig& model, std::int64_t tokens, int element_bytes,
                        AttentionKind attention);

// The tensors backward must recompute in a block (the closure: a dropped tensor's producer
// runs, and so do the producers of its dropped inputs), as a mask by Saved. Under flash, p and
// o are one op's outputs: when either is needed, both are.
std::array<bool, kSavedCount> recompute_closure(const BlockPlan& plan, AttentionKind attention);
double recompute_flops(const BlockPlan& plan, const ModelConfig& model, std::int64_t tokens, AttentionKind attention);

// What a step under `policy` keeps and recomputes, from the shapes alone (StepReport's fields
// of the same names).
struct PlanFigures {
  double activation_bytes_not_kept_fraction = 0, recompute_flops = 0;
  double layers_recomputed_fraction = 0, layers_fully_recomputed_fraction = 0;
};
PlanFigures plan_figures(const ActivationPolicy& policy, const ModelConfig& model, std::int64_t tokens, int element_bytes);

}  // namespace fp8lab::train
