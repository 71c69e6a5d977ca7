#include "harness/train/training_run.hpp"

#include <cmath>
#include <limits>
#include <span>
#include <stdexcept>

#include "kernels/cpu/check_finite_and_unscale.hpp"
#include "kernels/loss_scaling/found_inf_flag.hpp"
#include "kernels/loss_scaling/loss_scaler.hpp"
#include "kernels/memory_ledger.hpp"
#include "kernels/train/model_weights.hpp"
#include "kernels/train/sgd.hpp"
#include "kernels/train/training_step.hpp"

namespace fp8lab::train {
namespace {

bool is_norm_gain(const std::string& name) { return name.find("rms") != std::string::npos; }

// FP16 GEMMs overflow and underflow without a loss scale (the fp16 recipe, or an override).
bool needs_loss_scaling(const PrecisionRecipe& r) {
  const auto fp16 = [](const GemmPrecision& g) { return g.kind == GemmPrecision::Kind::fp16; };
  const auto fp16_override = [&](const std::optional<GemmPrecision>& g) { return g && fp16(*g); };
  bool any = fp16(r.fprop) || fp16(r.dgrad) || fp16(r.wgrad);
  for (const LayerOverride& o : r.overrides)
    any = any || fp16_override(o.fprop) || fp16_override(o.dgrad) || fp16_override(o.wgrad);
  return any;
}

struct Sequences {
  double loss_sum = 0;
  std::vector<NamedGradient> gradient_sums;  // double sums in the engine's tensor order
  std::size_t peak_bytes = 0;
};

// Runs the engine on each window [start, start + seq_len + 1) in order and sums what it returns.
Sequences run_sequences(const ModelConfig& model, const LlamaWeights& weights, const std::vector<std::int32_t>& stream,
                        const std::vector<std::int64_t>& starts, std::int64_t seq_len, double loss_scale,
                        const PrecisionRecipe& recipe, const ActivationPolicy& policy, MemoryLedger& ledger,
                        bool keep_gradients) {
  Sequences s;
  for (const std::int64_t start : starts) {
    const auto first = stream.begin() + static_cast<std::ptrdiff_t>(start);
    StepInput input{model, &weights, std::vector<int>(first, first + static_cast<std::ptrdiff_t>(seq_len + 1))};
    input.loss_scale = loss_scale;
    input.attention = policy.attention;
    StepResult r = run_training_step(input, recipe, policy, ledger);
    s.loss_sum += r.report.loss;
    s.peak_bytes = std::max(s.peak_bytes, r.report.peak_bytes_total);
    if (!keep_gradients) continue;
    if (s.gradient_sums.empty()) {
      s.gradient_sums = std::move(r.gradients);
      continue;
    }
    for (std::size_t t = 0; t < r.gradients.size(); ++t)
      for (std::size_t i = 0; i < r.gradients[t].values.size(); ++i) s.gradient_sums[t].values[i] += r.gradients[t].values[i];
  }
  return s;
}

}  // namespace

void TrainingRunConfig::validate() const {
  if (batch < 1) throw std::invalid_argument("batch: must be >= 1");
  if (seq_len < 1) throw std::invalid_argument("seq_len: must be >= 1");
  if (steps < 1) throw std::invalid_argument("steps: must be >= 1");
  if (!std::isfinite(clip) || clip < 0) throw std::invalid_argument("clip: must be finite and >= 0 (0: no clipping)");
  if (val_every < 0) throw std::invalid_argument("val_every: must be >= 0 (0: never)");
  if (val_sequences < 1) throw std::invalid_argument("val_sequences: must be >= 1");
  if (schedule.steps != steps) throw std::logic_error("schedule.steps differs from steps");
  schedule.validate();
  adamw.validate();
}

TrainingRunResult run_training(const TrainingRunConfig& config, const LlamaWeights& initial, const TokenStream& train,
                               const TokenStream* validation, const StepObserver& observer) {
  config.validate();
  const ModelConfig model = config_of(initial);
  const PrecisionRecipe& recipe = config.recipe;
  recipe.validate(model);
  const ActivationPolicy policy = make_policy(config.policy, model, config.seq_len + 1, 4, config.attention);
  const BatchSchedule schedule(static_cast<std::int64_t>(train.tokens.size()), config.batch, config.seq_len, config.order,
                               config.data_seed);
  std::vector<std::int64_t> val_starts;
  if (validation && config.val_every > 0) {
    const BatchSchedule val(static_cast<std::int64_t>(validation->tokens.size()), 1, config.seq_len, BatchOrder::sequential, 0);
    for (std::int64_t j = 0; j < config.val_sequences; ++j) val_starts.push_back(val.start(j, 0));
  }
  const bool loss_scaling = needs_loss_scaling(recipe);

  TrainingRunResult result;
  result.final_weights = initial;
  LlamaWeights& weights = result.final_weights;
  HostAllocator host;
  MemoryLedger ledger(&host);
  FoundInfFlag found_inf(ledger);
  LossScaler scaler(LossScalerConfig::pytorch());
  std::vector<std::string> names;
  std::vector<AdamWMoments> moments;
  std::int64_t updates = 0;

  for (std::int64_t step = 0; step < config.steps; ++step) {
    const auto begin = std::chrono::steady_clock::now();
    StepRecord record;
    record.lr = config.schedule.at(step);
    record.loss_scale = loss_scaling ? scaler.scale() : 1.0;
    std::vector<std::int64_t> starts;
    for (std::int64_t i = 0; i < config.batch; ++i) starts.push_back(schedule.start(step, i));
    Sequences s = run_sequences(model, weights, train.tokens, starts, config.seq_len, record.loss_scale, recipe, policy,
                                ledger, /*keep_gradients=*/true);
    record.train_loss = s.loss_sum / static_cast<double>(config.batch);
    record.step_peak_bytes = s.peak_bytes;

    std::vector<std::vector<float>> gradients;
    for (const NamedGradient& g : s.gradient_sums) {
      std::vector<float>& mean = gradients.emplace_back(g.values.size());
      for (std::size_t i = 0; i < mean.size(); ++i)
        mean[i] = static_cast<float>(g.values[i] / static_cast<double>(config.batch));
    }
    if (names.empty()) {
      for (const NamedGradient& g : s.gradient_sums) {
        names.push_back(g.name);
        moments.emplace_back(g.values.size(), config.adamw.moments);
        result.parameters += g.values.size();
      }
    }
    bool overflow = false;
    if (loss_scaling) {
      std::vector<std::span<float>> spans(gradients.begin(), gradients.end());
      *found_inf.data() = 0.0f;
      cpu::check_finite_and_unscale(spans, scaler.inverse_scale(), found_inf.data());
      overflow = *found_inf.data() != 0.0f;
    }
    double squares = 0;
    for (const std::vector<float>& g : gradients)
      for (const float v : g) squares += static_cast<double>(v) * static_cast<double>(v);
    record.grad_norm = std::sqrt(squares);
    record.diverged = !std::isfinite(record.train_loss) || (!loss_scaling && !std::isfinite(record.grad_norm));
    // The scaler counts a step clean only when it is: an overflow or a non-finite loss backs off.
    if (loss_scaling) record.skipped = scaler.update(overflow || record.diverged);
    if (record.diverged) record.skipped = true;
    if (!record.skipped) {
      if (config.clip > 0 && record.grad_norm > config.clip) {
        const auto coefficient = static_cast<float>(config.clip / (record.grad_norm + 1e-6));
        for (std::vector<float>& g : gradients)
          for (float& v : g) v *= coefficient;
      }
      ++updates;
      for (std::size_t t = 0; t < names.size(); ++t) {
        const double decay = !config.decay_norm_gains && is_norm_gain(names[t]) ? 0.0 : config.adamw.weight_decay;
        adamw_update(named_weight_values(weights, names[t]), gradients[t], moments[t], config.adamw, updates, record.lr, decay);
      }
    }
    record.step_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    record.tokens_per_second = static_cast<double>(config.batch * config.seq_len) / record.step_seconds;
    const bool last = step + 1 == config.steps;
    record.val_loss = std::numeric_limits<double>::quiet_NaN();
    if (!val_starts.empty() && ((step + 1) % config.val_every == 0 || last))
      record.val_loss = run_sequences(model, weights, validation->tokens, val_starts, config.seq_len, 1.0, recipe, policy,
                                      ledger, /*keep_gradients=*/false)
                            .loss_sum /
                        static_cast<double>(val_starts.size());
    result.steps.push_back(record);
    if (observer) observer(step, record);
  }
  result.master_weight_bytes = 4 * result.parameters;
  for (const AdamWMoments& m : moments) result.optimizer_state_bytes += m.bytes();
  result.gradient_accumulator_bytes = (4 + 8) * result.parameters;
  std::size_t step_peak = 0;
  for (const StepRecord& r : result.steps) step_peak = std::max(step_peak, r.step_peak_bytes);
  result.peak_bytes = step_peak + result.master_weight_bytes + result.optimizer_state_bytes + result.gradient_accumulator_bytes;
  return result;
}

}  // namespace fp8lab::train
