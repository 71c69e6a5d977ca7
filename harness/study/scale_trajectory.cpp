#include "harness/study/scale_trajectory.hpp"

#include <cmath>
#include <limits>
#include <random>
#include <span>
#include <stdexcept>

#include "harness/metrics/train_step_errors.hpp"
#include "harness/train/llama2c_weights.hpp"
#include "kernels/cpu/check_finite_and_unscale.hpp"
#include "kernels/loss_scaling/found_inf_flag.hpp"
#include "kernels/loss_scaling/loss_scaler.hpp"
#include "kernels/memory_ledger.hpp"
#include "kernels/train/model_weights.hpp"
#include "kernels/train/sgd.hpp"
#include "kernels/train/training_step.hpp"

namespace fp8lab {
namespace {

bool is_weight_matrix(const std::string& name) { return name.find("rms") == std::string::npos; }

// Cast to the FP8 format at scale s, saturating; returns whether the value overflowed (rounded
// beyond max before saturation) and writes the dequantized value.
template <class F>
bool cast_delayed(float& g, float s, float s_inverse) {
  const float v = g * s;
  const bool overflow = (encode<F>(v, Saturation::nosat) & FormatLayout<F>::magnitude_mask) > F::max_finite_code;
  g = decode<F>(encode<F>(v, Saturation::satfinite)) * s_inverse;
  return overflow;
}

}  // namespace

Trajectory run_scale_trajectory(const TrajectoryConfig& c) {
  const bool delayed = c.variant == "fp8_delayed";
  if (!delayed && c.variant != "pytorch" && c.variant != "megatron")
    throw std::invalid_argument("variant '" + c.variant + "' is not one of pytorch, megatron, fp8_delayed");
  if (c.steps < 1) throw std::invalid_argument("steps: must be >= 1");
  if (c.tokens < 2 || c.stream_tokens < c.tokens) throw std::invalid_argument("tokens: need 2 <= tokens <= stream_tokens");
  LossScaler scaler(delayed ? LossScalerConfig::pytorch() : c.scaler);  // validates
  c.delayed.validate();
  LlamaWeights weights = load_llama2c_checkpoint(find_data_file("stories260K/stories260K.bin"), kStories260kSha256);
  const train::ModelConfig model = train::config_of(weights);
  const std::vector<int> stream = stories260k_greedy_tokens(weights, static_cast<int>(c.stream_tokens));
  const train::PrecisionRecipe recipe = train::named_recipe("fp16");
  const train::ActivationPolicy policy = train::make_policy("none", model, c.tokens, 4, c.attention);
  HostAllocator host;
  MemoryLedger ledger(&host);
  FoundInfFlag found_inf(ledger);
  std::mt19937_64 windows(c.seed);
  std::vector<DelayedScaler> tensor_scalers;
  std::size_t recorded = std::numeric_limits<std::size_t>::max();

  Trajectory t;
  for (std::int64_t step = 0; step < c.steps; ++step) {
    const auto offset = static_cast<std::ptrdiff_t>(windows() % static_cast<std::uint64_t>(c.stream_tokens - c.tokens + 1));
    train::StepInput input{model, &weights, std::vector<int>(stream.begin() + offset, stream.begin() + offset + c.tokens)};
    input.loss_scale = delayed ? c.delayed_loss_scale : scaler.scale();
    input.attention = c.attention;
    train::StepResult r = train::run_training_step(input, recipe, policy, ledger);
    std::vector<std::vector<float>> grads;
    for (const train::NamedGradient& g : r.gradients) grads.emplace_back(g.values.begin(), g.values.end());
    if (c.overflow_every > 0 && (step + 1) % c.overflow_every == 0) {
      std::mt19937_64 where(c.seed * 1000003u + static_cast<std::uint64_t>(step));
      std::vector<float>& g = grads[where() % grads.size()];
      g[where() % g.size()] = std::numeric_limits<float>::infinity();
    }
    std::vector<std::span<float>> spans(grads.begin(), grads.end());
    *found_inf.data() = 0.0f;
    const float inverse = delayed ? static_cast<float>(1.0 / static_cast<double>(static_cast<float>(c.delayed_loss_scale)))
                                  : scaler.inverse_scale();
    cpu::check_finite_and_unscale(spans, inverse, found_inf.data());
    const bool inf = *found_inf.data() != 0.0f;
    double saturated = std::numeric_limits<double>::quiet_NaN();
    bool skip = false;
    if (delayed) {
      if (tensor_scalers.empty()) {
        for (std::size_t i = 0; i < r.gradients.size(); ++i) {
          tensor_scalers.emplace_back(c.delayed);
          if (r.gradients[i].name == c.delayed_tensor) recorded = i;
        }
        if (recorded >= r.gradients.size()) throw std::invalid_argument("delayed tensor '" + c.delayed_tensor + "' is not a weight");
      }
      t.scale.push_back(tensor_scalers[recorded].scale());
      skip = inf;  // a non-finite gradient skips the step as with a static loss scale
      saturated = 0;
      if (!skip)
        for (std::size_t i = 0; i < grads.size(); ++i) {
          if (!is_weight_matrix(r.gradients[i].name)) continue;
          DelayedScaler& s = tensor_scalers[i];
          float amax = 0;
          for (float g : grads[i]) amax = std::max(amax, std::fabs(g));
          bool any = false;
          const float scale = s.scale(), scale_inverse = s.scale_inverse();
          for (float& g : grads[i])
            any |= c.delayed.format == Fp8Format::e4m3 ? cast_delayed<E4M3>(g, scale, scale_inverse)
                                                       : cast_delayed<E5M2>(g, scale, scale_inverse);
          saturated += any;
          s.update(amax);
        }
    } else {
      t.scale.push_back(scaler.scale());
      skip = scaler.update(inf);
    }
    if (!skip)
      for (std::size_t i = 0; i < grads.size(); ++i) train::sgd_step(weights, r.gradients[i].name, grads[i], c.learning_rate);
    t.found_inf.push_back(inf ? 1.0 : 0.0);
    t.skipped.push_back(skip ? 1.0 : 0.0);
    t.loss.push_back(r.report.loss);
    t.saturated_tensors.push_back(saturated);
  }
  return t;
}

}  // namespace fp8lab
