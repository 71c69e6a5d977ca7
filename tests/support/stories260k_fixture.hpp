#pragma once
// The real stories260K checkpoint and a real 64-token sequence (its own greedy continuation
// of BOS), loaded once per test binary: the engine tests' shared operands; and that sequence as
// the token stream the training-loop tests train on.
#include <vector>

#include "harness/metrics/train_step_errors.hpp"
#include "harness/train/llama2c_weights.hpp"
#include "harness/train/token_file.hpp"

namespace fp8lab::test {

inline const LlamaWeights& stories260k_weights() {
  static const LlamaWeights w = load_llama2c_checkpoint(find_data_file("stories260K/stories260K.bin"), kStories260kSha256);
  return w;
}

inline const std::vector<int>& stories260k_tokens() {
  static const std::vector<int> t = stories260k_greedy_tokens(stories260k_weights(), 64);
  return t;
}

inline train::TokenStream stories260k_token_stream() {
  train::TokenStream s;
  s.source = "stories260K greedy tokens";
  s.tokens.assign(stories260k_tokens().begin(), stories260k_tokens().end());
  return s;
}

}  // namespace fp8lab::test
