// check_step_input (training_step.hpp): what a step refuses before it allocates anything.
#include <cmath>
#include <stdexcept>
#include <string>

#include "kernels/train/training_step.hpp"

namespace fp8lab::train {

std::int64_t check_step_input(const StepInput& input, const PrecisionRecipe& recipe, const ActivationPolicy& policy,
                              bool shapes_only) {
  input.model.validate();
  recipe.validate(input.model);
  const std::int64_t T = shapes_only && input.tokens.empty() ? input.positions : static_cast<std::int64_t>(input.tokens.size());
  if (T < 2) throw std::invalid_argument("tokens: a step needs at least 2 positions, not " + std::to_string(T));
  if (!(input.loss_scale > 0) || !std::isfinite(input.loss_scale))
    throw std::invalid_argument("loss_scale: must be finite and > 0, not " + std::to_string(input.loss_scale));
  if (static_cast<int>(policy.blocks.size()) != input.model.layers)
    throw std::invalid_argument("policy '" + policy.spec + "' was made for " + std::to_string(policy.blocks.size()) +
                                " blocks, the model has " + std::to_string(input.model.layers));
  // The saved p slot, selective and the recompute closure all depend on the attention kind.
  if (policy.attention != input.attention)
    throw std::invalid_argument("policy '" + policy.spec + "' was made for " + attention_kind_name(policy.attention) +
                                " attention, the step runs " + attention_kind_name(input.attention));
  if (policy.slices > 0 && T % policy.slices != 0)
    throw std::invalid_argument("policy '" + policy.spec + "': " + std::to_string(policy.slices) + " slices do not divide " +
                                std::to_string(T) + " positions");
  if (!shapes_only) {
    if (!input.weights) throw std::invalid_argument("weights: an allocating step needs weights");
    for (int t : input.tokens)
      if (t < 0 || t >= input.model.vocab)
        throw std::invalid_argument("tokens: " + std::to_string(t) + " is outside the vocabulary of " + std::to_string(input.model.vocab));
  }
  return T;
}

}  // namespace fp8lab::train
