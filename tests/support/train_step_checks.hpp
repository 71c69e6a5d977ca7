#pragma once
// What the engine tests share: one training step with a fresh allocating ledger, the bit-for-bit
// comparison of two steps' losses and gradients, and the check of recipe fp64 against the
// independent FP64 reference (reference/llama_fp64_ref, attention computed naively).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "harness/metrics/train_step_errors.hpp"
#include "kernels/train/training_step.hpp"

namespace fp8lab::test {

inline train::StepResult run_step(const train::ModelConfig& model, const LlamaWeights& w, const std::vector<int>& tokens,
                                  const train::PrecisionRecipe& recipe,
                                  train::AttentionKind attention = train::AttentionKind::naive,
                                  const std::string& policy = "none") {
  HostAllocator host;
  MemoryLedger ledger(&host);
  train::StepInput in{model, &w, tokens};
  in.attention = attention;
  const auto T = static_cast<std::int64_t>(tokens.size());
  return train::run_training_step(in, recipe, train::make_policy(policy, model, T, 4, attention), ledger);
}

inline bool bit_identical(const train::StepResult& a, const train::StepResult& b) {
  if (a.gradients.size() != b.gradients.size()) return false;
  for (std::size_t i = 0; i < a.gradients.size(); ++i) {
    const auto& x = a.gradients[i].values;
    const auto& y = b.gradients[i].values;
    if (x.size() != y.size() || std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) != 0) return false;
  }
  return std::memcmp(&a.report.loss, &b.report.loss, sizeof(double)) == 0;
}

// Recipe fp64 and the reference compute the same FP64 arithmetic in different summation orders
// (the reference in 8 lanes, the engine in index order; under flash, also the online softmax's
// rescaling by exp(m - m') and the recomputed p = exp(s - L), a few more single roundings per
// element over sums no longer than before), so each dot product differs by at most
// gamma_n sum|a_k b_k| ~ n u of its magnitude, with n <= 512 (the vocabulary sum of the loss;
// every other length is <= 172 here) and u = 2^-53: about 6e-14. Through the blocks and the
// attention softmax these relative perturbations are amplified by the conditioning of the chain
// (a factor of order 10 per block in the worst case measured on stories260K, far less on
// average), which keeps a relative Frobenius difference below ~1e-12 (measured: at most 5.5e-15
// over all tensors on stories260K); an error in any term of the chain rule, or of the online
// softmax, is O(1) relative.
inline constexpr double kFp64Tolerance = 1e-12;

inline void check_fp64_matches_reference(const train::ModelConfig& model, const LlamaWeights& w,
                                         const std::vector<int>& tokens, train::AttentionKind attention) {
  const train::StepResult r = run_step(model, w, tokens, train::named_recipe("fp64"), attention);
  CHECK(r.report.attention == train::attention_kind_name(attention));
  const ReferenceStep ref = reference_step(w, tokens);
  CHECK(std::abs(r.report.loss - ref.loss) <= kFp64Tolerance * std::abs(ref.loss));
  const GradientErrors e = gradient_errors(r.gradients, ref.gradients);
  for (std::size_t i = 0; i < e.names.size(); ++i) {
    INFO(e.names[i] << " rel_frobenius " << e.rel_frobenius[i]);
    CHECK(e.rel_frobenius[i] <= kFp64Tolerance);
  }
  CHECK(e.total_rel_frobenius <= kFp64Tolerance);
}

}  // namespace fp8lab::test
