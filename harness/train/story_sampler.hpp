#pragma once
// A token corpus sampled from a llama2.c model itself (stories260K writes TinyStories-like
// text), so that a training study needs no data beyond the checkpoint. Stories start at BOS
// (id 1) and end when the model samples BOS again or after `max_story` tokens; the corpus is
// their concatenation, each story's BOS included, cut to `count` tokens.
//
// The model runs one token at a time with a key/value cache, in FP64, every sum in a fixed
// order (the engine's model: RMSNorm eps 1e-5, RoPE theta 1e4 on consecutive pairs, grouped
// KV heads, SwiGLU, classifier tied to the embedding). Sampling: p = softmax(logits / T) in
// FP64; u = (rng() >> 11) * 2^-53 from std::mt19937_64(seed); the first id whose cumulative p
// exceeds u (the last id if rounding leaves u above the total). T = 0 picks the argmax.
// Same checkpoint, temperature and seed give the same ids on any x86-64 with the same libm.
#include <cstdint>
#include <vector>

#include "kernels/train/llama_weights.hpp"

namespace fp8lab::train {

struct SamplerSettings {
  std::int64_t count = 0;
  double temperature = 1.0;
  std::uint64_t seed = 0;
  int max_story = 256;  // at most the checkpoint's seq_len
  // Throws std::invalid_argument naming the field; `seq_len` is the checkpoint's (0: unknown).
  void validate(int seq_len) const;
};

std::vector<std::int32_t> sample_corpus(const LlamaWeights& model, const SamplerSettings& settings);

}  // namespace fp8lab::train
