#include "harness/train/training_run.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <span>
#include <stdexcept>

#include "harness/train/data_parallel_gradient.hpp"
#include "harness/train/optimizer_step.hpp"
#include "harness/train/resident_set.hpp"
#include "kernels/train/heap_retention.hpp"
#include "kernels/cpu/check_finite_and_unscale.hpp"
#include "kernels/loss_scaling/found_inf_flag.hpp"
#include "kernels/loss_scaling/loss_scaler.hpp"
#include "kernels/memory_ledger.hpp"
#include "kernels/train/model_weights.hpp"
#include "kernels/train/sgd.hpp"
#include "kernels/train/training_step.hpp"

namespace fp8lab::train {
namespace {


// FP16 GEMMs overflow and underflow without a loss scale (the fp16 recipe, or an override).
bool needs_loss_scaling(const PrecisionRecipe& r) {
  const auto fp16 = [](const GemmPrecision& g) { return g.kind == GemmPrecision::Kind::fp16; };
  const auto fp16_override = [&](const std::optional<GemmPrecision>& g) { return g && fp16(*g); };
  bool any = fp16(r.fprop) || fp16(r.dgrad) || fp16(r.wgrad);
  for (const LayerOverride& o : r.overrides)
    any = any || fp16_override(o.fprop) || fp16_override(o.dgrad) || fp16_override(o.wgrad);
  return any;
}

// What the optimizer carries from step to step: the tensors' names (the engine's order), their
// AdamW moments, the updates applied so far and the loss scaler.
struct OptimizerState {
  LossScaler scaler{LossScalerConfig::pytorch()};
  DelayedOperandScales delayed;  // delayed-scaling recipes: the operands' amax histories
  std::vector<std::string> names;
  std::vector<AdamWMoments> moments;
  std::int64_t updates = 0;
  std::vector<WorkerCompressor> compressors;       // one per worker when compressing (their residuals)
  std::optional<PrecisionController> controller;   // adaptive precision scheduling

  // The first step sets the tensors up from the gradients; later (and resumed) steps must see
  // the same tensors.
  void match(const StepGradient& g, MomentFormat format, const std::filesystem::path& checkpoint) {
    if (names.empty()) {
      names = g.names;
      for (const std::vector<float>& values : g.gradients) moments.emplace_back(values.size(), format);
      return;
    }
    bool same = names == g.names;
    for (std::size_t t = 0; same && t < names.size(); ++t) same = moments[t].size() == g.gradients[t].size();
    if (!same)
      throw CheckpointError("checkpoint " + checkpoint.string() + ": field 'tensors': they are not the model's tensors");
  }
};

RunCheckpoint snapshot(const std::string& identity, std::int64_t next_step, const std::vector<StepRecord>& records,
                       const LlamaWeights& weights, const OptimizerState& state) {
  RunCheckpoint c{identity, this_build(), next_step, state.updates, state.scaler.state(), records, {}, {}, {}, {}};
  for (const DelayedOperand& d : state.delayed.operands())
    c.delayed.push_back({d.key, d.scaler.config(), d.scaler.history(), d.scaler.scale()});
  if (state.controller) c.controller = state.controller->state();
  for (const WorkerCompressor& w : state.compressors) {
    std::vector<std::vector<float>>& worker = c.residuals.emplace_back();
    for (std::size_t t = 0; t < w.tensor_count(); ++t) worker.emplace_back(w.residual(t).begin(), w.residual(t).end());
  }
  for (std::size_t t = 0; t < state.names.size(); ++t) {
    TensorState& ts = c.tensors.emplace_back();
    ts.name = state.names[t];
    const std::span<const float> w = named_weight_values(weights, ts.name);
    ts.weights.assign(w.begin(), w.end());
    const AdamWMoments& m = state.moments[t];
    for (std::size_t i = 0; i < m.size(); ++i) {
      ts.m.push_back(m.m(i));
      ts.v.push_back(m.v(i));
    }
  }
  return c;
}

// Puts a checkpoint's state in place; returns the step to go on from.
std::int64_t restore(const RunCheckpoint& c, const std::filesystem::path& file, const TrainingRunConfig& config,
                     LlamaWeights& weights, OptimizerState& state) {
  const auto fail = [&](const std::string& field, const std::string& what) {
    throw CheckpointError("checkpoint " + file.string() + ": field '" + field + "': " + what);
  };
  if (c.next_step >= config.steps)
    fail("next_step", std::to_string(c.next_step) + " steps done; the run has " + std::to_string(config.steps));
  try {
    state.scaler = LossScaler(LossScalerConfig::pytorch(), c.scaler);
  } catch (const std::invalid_argument& e) {
    fail("scaler", e.what());
  }
  state.updates = c.updates;
  for (const TensorState& t : c.tensors) {
    std::span<float> w;
    try {
      w = named_weight_values(weights, t.name);
    } catch (const std::invalid_argument& e) {
      fail("tensors", e.what());
    }
    if (w.size() != t.weights.size())
      fail("tensors", t.name + " holds " + std::to_string(t.weights.size()) + " values; the model's has " +
                          std::to_string(w.size()));
    std::copy(t.weights.begin(), t.weights.end(), w.begin());
    state.names.push_back(t.name);
    // The moments were stored decoded; re-encoding them gives the same codes (adamw.hpp).
    state.moments.emplace_back(t.weights.size(), config.adamw.moments).assign(t.m, t.v);
  }
  for (const DelayedOperandState& d : c.delayed) {
    try {
      state.delayed.restore(d.key, d.config, d.history, d.scale);
    } catch (const std::invalid_argument& e) {
      fail("delayed", e.what());
    }
  }
  if (state.controller.has_value() != c.controller.has_value())
    fail("controller", state.controller ? "the run schedules precisions; the checkpoint holds no controller state"
                                        : "the checkpoint holds a controller state; the run schedules no precisions");
  try {
    if (state.controller) state.controller->restore(*c.controller);
  } catch (const std::invalid_argument& e) {
    fail("controller", e.what());
  }
  if (c.residuals.size() != state.compressors.size())
    fail("residuals", std::to_string(c.residuals.size()) + " workers' residuals; the run compresses for " +
                          std::to_string(state.compressors.size()));
  try {
    for (std::size_t w = 0; w < c.residuals.size(); ++w)
      for (std::size_t t = 0; t < c.residuals[w].size(); ++t) state.compressors[w].restore_residual(t, c.residuals[w][t]);
  } catch (const std::invalid_argument& e) {
    fail("residuals", e.what());
  }
  return c.next_step;
}

}  // namespace

void TrainingRunConfig::validate_settings() const {
  if (batch < 1) throw std::invalid_argument("batch: must be >= 1");
  if (seq_len < 1) throw std::invalid_argument("seq_len: must be >= 1");
  if (steps < 1) throw std::invalid_argument("steps: must be >= 1");
  if (!std::isfinite(clip) || clip < 0) throw std::invalid_argument("clip: must be finite and >= 0 (0: no clipping)");
  if (val_every < 0) throw std::invalid_argument("val_every: must be >= 0 (0: never)");
  if (val_sequences < 1) throw std::invalid_argument("val_sequences: must be >= 1");
  if (stats_every < 0) throw std::invalid_argument("stats_every: must be >= 0 (0: never)");
  if (schedule.steps != steps) throw std::logic_error("schedule.steps differs from steps");
  schedule.validate();
  adamw.validate();
  techniques.validate();
  if (batch % techniques.workers != 0)
    throw std::invalid_argument("workers: " + std::to_string(techniques.workers) + " does not divide the batch of " +
                                std::to_string(batch));
}

void TrainingRunConfig::validate() const {
  validate_settings();
  const auto fp8 = [](const GemmPrecision& g) { return g.kind == GemmPrecision::Kind::fp8; };
  if (techniques.adaptive_on() && !fp8(recipe.fprop) && !fp8(recipe.dgrad) && !fp8(recipe.wgrad))
    throw std::invalid_argument("adaptive_every: the recipe " + recipe.name + " runs no FP8 GEMM to schedule");
  // A GEMM the controller holds in BF16 records no amaxes, so its delayed scale would be stale
  // when it returns to FP8.
  const auto delayed = [](const GemmPrecision& g) { return g.delayed_scaling; };
  bool any_delayed = delayed(recipe.fprop) || delayed(recipe.dgrad) || delayed(recipe.wgrad);
  for (const LayerOverride& o : recipe.overrides)
    for (const auto* g : {&o.fprop, &o.dgrad, &o.wgrad}) any_delayed = any_delayed || (*g && delayed(**g));
  if (techniques.adaptive_on() && any_delayed)
    throw std::invalid_argument("adaptive_every: not with the delayed-scaling recipe " + recipe.name +
                                " (a GEMM back from BF16 would quantize with the scale it left with)");
  if (techniques.compressing() && needs_loss_scaling(recipe))
    throw std::invalid_argument("compression: not with a loss-scaled (fp16) recipe: its overflow steps would enter the "
                                "compressed gradients and their error-feedback residuals");
}

std::string TrainingRunConfig::describe() const {
  std::ostringstream s;
  s.precision(17);
  s << "recipe = " << recipe.name << "\nfprop = " << recipe.fprop.describe() << "\ndgrad = " << recipe.dgrad.describe()
    << "\nwgrad = " << recipe.wgrad.describe() << "\n";
  for (const LayerOverride& o : recipe.overrides)
    for (const auto& [kind, g] : {std::pair{"fprop", &o.fprop}, {"dgrad", &o.dgrad}, {"wgrad", &o.wgrad}})
      if (*g) s << "override " << o.layer << " " << kind << " = " << (*g)->describe() << "\n";
  s << "policy = " << policy << "\nattention = " << attention_kind_name(attention) << "\nbatch = " << batch << "\nseq_len = " << seq_len << "\nsteps = " << steps
    << "\norder = " << (order == BatchOrder::sequential ? "sequential" : "shuffled") << "\ndata_seed = " << data_seed
    << "\nschedule = " << lr_schedule_name(schedule.kind) << " lr " << schedule.lr << " min_lr " << schedule.min_lr
    << " warmup " << schedule.warmup << "\nadamw = beta1 " << adamw.beta1 << " beta2 " << adamw.beta2 << " eps "
    << adamw.eps << " weight_decay " << adamw.weight_decay << " moments " << moment_format_name(adamw.moments)
    << "\ndecay_norm_gains = " << decay_norm_gains << "\nclip = " << clip << "\nval_every = " << val_every
    << "\nval_sequences = " << val_sequences << "\nstats_every = " << stats_every << "\n" << techniques.describe();
  return s.str();
}

TrainingRunResult run_training(const TrainingRunConfig& config, const LlamaWeights& initial, const TokenStream& train,
                               const TokenStream* validation, const StepObserver& observer, const Checkpointing& checkpointing) {
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

  // Freed blocks stay in the heap for the next step (heap_retention.hpp); a sweep's earlier runs
  // left theirs, so they are handed back first: then the resident set is code, libraries, token
  // streams and the caller's initial weights, what the process held before this run asked for
  // anything.
  release_free_heap_memory();
  TrainingRunResult result;
  result.resident_before_run_bytes = read_resident_set().current_bytes;
  retain_freed_heap_memory();
  result.final_weights = initial;
  LlamaWeights& weights = result.final_weights;
  HostAllocator host;
  MemoryLedger ledger(&host);
  FoundInfFlag found_inf(ledger);
  OptimizerState state;
  for (std::int64_t w = 0; config.techniques.compressing() && w < config.techniques.workers; ++w)
    state.compressors.emplace_back(config.techniques.compression, static_cast<std::size_t>(w));
  if (config.techniques.adaptive_on())
    state.controller.emplace(*config.techniques.adaptive, recipe, linear_layer_names(model));
  std::int64_t first_step = 0;
  if (const RunCheckpoint* c = checkpointing.resume_from) {
    first_step = restore(*c, checkpointing.file, config, weights, state);
    result.steps = c->records;
    result.resumed_at_step = first_step;
  }

  for (std::int64_t step = first_step; step < config.steps; ++step) {
    const auto begin = std::chrono::steady_clock::now();
    reset_resident_peak();  // where refused, the mark read below is the process's: a bound from above
    StepRecord record;
    record.lr = config.schedule.at(step);
    record.loss_scale = loss_scaling ? state.scaler.scale() : 1.0;
    std::vector<std::int64_t> starts;
    for (std::int64_t i = 0; i < config.batch; ++i) starts.push_back(schedule.start(step, i));
    const bool last = step + 1 == config.steps;
    const bool sample_stats = config.stats_every > 0 && (step % config.stats_every == 0 || last);
    Fp8OperandStats stats;
    const PrecisionRecipe& step_recipe = state.controller ? state.controller->current() : recipe;
    SequenceRunner runner{&model, &weights, &train.tokens, config.seq_len, record.loss_scale, &step_recipe, &policy,
                          &ledger, &state.delayed, sample_stats ? &stats : nullptr};
    StepGradient g = data_parallel_gradient(runner, starts, config.techniques.workers, state.compressors, step);
    state.delayed.roll();  // the step's amaxes set the next step's scales, whether or not it updates
    record.operand_stats = stats.entries();
    record.train_loss = g.loss_sum / static_cast<double>(config.batch);
    record.step_peak_bytes = g.peak_bytes;
    record.bytes_sent_per_worker = g.bits_sent_per_worker / 8;
    record.compression_ratio = g.bits_sent_per_worker / g.fp32_bits_per_worker;
    record.fp8_flop_fraction = fp8_flop_fraction(step_recipe, model, config.seq_len + 1);
    if (state.controller && state.controller->due(step)) {
      // The controller's probe: the step's first sequence once more under the all-FP8 recipe,
      // tallying every FP8 GEMM's operands whatever precision the layer runs now; its gradients
      // are dropped and its delayed-scaling amaxes recorded nowhere. Counted in step_seconds.
      Fp8OperandStats probe;
      DelayedOperandScales scales = state.delayed;
      SequenceRunner probe_runner = runner;
      probe_runner.recipe = &recipe;
      probe_runner.delayed = &scales;
      probe_runner.operand_stats = &probe;
      run_sequences(probe_runner, std::span(starts).first(1));
      state.controller->observe(step, probe.entries());
    }
    if (state.controller)
      for (const std::int64_t high : state.controller->state().high) record.gemms_high_precision += static_cast<double>(high);
    std::vector<std::vector<float>>& gradients = g.gradients;
    state.match(g, config.adamw.moments, checkpointing.file);
    bool overflow = false;
    if (loss_scaling) {
      std::vector<std::span<float>> spans(gradients.begin(), gradients.end());
      *found_inf.data() = 0.0f;
      cpu::check_finite_and_unscale(spans, state.scaler.inverse_scale(), found_inf.data());
      overflow = *found_inf.data() != 0.0f;
    }
    double squares = 0;
    for (const std::vector<float>& v : gradients)
      for (const float x : v) squares += static_cast<double>(x) * static_cast<double>(x);
    record.grad_norm = std::sqrt(squares);
    record.diverged = !std::isfinite(record.train_loss) || (!loss_scaling && !std::isfinite(record.grad_norm));
    // The scaler counts a step clean only when it is: an overflow or a non-finite loss backs off.
    if (loss_scaling) record.skipped = state.scaler.update(overflow || record.diverged);
    if (record.diverged) record.skipped = true;
    record.update_fraction = 0;
    record.optimizer_flops = 0;
    if (!record.skipped) {
      if (config.clip > 0 && record.grad_norm > config.clip) {
        const auto coefficient = static_cast<float>(config.clip / (record.grad_norm + 1e-6));
        for (std::vector<float>& v : gradients)
          for (float& x : v) x *= coefficient;
      }
      ++state.updates;
      const UpdateCounts counts = apply_adamw(config.adamw, config.techniques.sparse, config.decay_norm_gains, state.names,
                                              state.moments, state.updates, weights, gradients, record.lr);
      record.update_fraction = counts.update_fraction();
      record.optimizer_flops = counts.flops;
    }
    record.zero_weight_fraction = zero_fraction(weights, state.names);
    record.step_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    record.tokens_per_second = static_cast<double>(config.batch * config.seq_len) / record.step_seconds;
    record.val_loss = std::numeric_limits<double>::quiet_NaN();
    if (!val_starts.empty() && ((step + 1) % config.val_every == 0 || last)) {
      DelayedOperandScales scales = state.delayed;  // validation reads the scales, records nothing
      const PrecisionRecipe& val_recipe = state.controller ? state.controller->current() : recipe;
      const SequenceRunner val_runner{&model, &weights, &validation->tokens, config.seq_len, 1.0, &val_recipe, &policy,
                                      &ledger, &scales, nullptr};
      record.val_loss = run_sequences(val_runner, val_starts, /*forward_only=*/true).loss_sum /
                        static_cast<double>(val_starts.size());
    }
    record.resident_peak_bytes = read_resident_set().peak_bytes;
    // Validation and checkpoints allocate what no training step reuses (other batch shapes, the
    // serialized run), which heap retention would keep resident. So the heap's free memory goes
    // back after them: one trim every val_every / checkpoint_every steps, whose page faults the
    // next step repays once.
    const bool validated = !std::isnan(record.val_loss);
    result.steps.push_back(record);
    if (observer) observer(step, record);
    const bool may_checkpoint = !last && !checkpointing.file.empty();
    const bool stop = may_checkpoint && checkpointing.stop_requested && checkpointing.stop_requested();
    const bool checkpoint =
        may_checkpoint && (stop || (checkpointing.every > 0 && (step + 1) % checkpointing.every == 0));
    if (checkpoint)
      write_checkpoint(checkpointing.file, snapshot(checkpointing.identity, step + 1, result.steps, weights, state));
    if (validated || checkpoint) release_free_heap_memory();
    if (stop) {
      result.stopped = true;
      return result;
    }
  }
  for (const std::string& name : state.names) result.parameters += named_weight_values(weights, name).size();
  result.master_weight_bytes = 4 * result.parameters;
  for (const AdamWMoments& m : state.moments) result.optimizer_state_bytes += m.bytes();
  if (state.controller) result.switches = state.controller->switches();
  if (!state.compressors.empty()) result.error_feedback_bytes_per_worker = state.compressors.front().residual_bytes();
  result.gradient_accumulator_bytes = (4 + 8) * result.parameters;
  // The all-reduce (data_parallel_gradient.hpp), when it runs: a worker's FP32 mean and the
  // double sum over workers; error feedback adds every simulated worker's FP32 residuals.
  if (config.techniques.workers > 1 || config.techniques.compressing()) result.gradient_accumulator_bytes += (4 + 8) * result.parameters;
  for (const WorkerCompressor& w : state.compressors) result.gradient_accumulator_bytes += w.residual_bytes();
  std::size_t step_peak = 0;
  for (const StepRecord& r : result.steps) step_peak = std::max(step_peak, r.step_peak_bytes);
  result.peak_bytes = step_peak + result.master_weight_bytes + result.optimizer_state_bytes + result.gradient_accumulator_bytes;
  return result;
}

}  // namespace fp8lab::train
