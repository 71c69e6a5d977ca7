#include "harness/study/train_run_columns.hpp"

#include <algorithm>
#include <limits>
#include <map>

#include "harness/study/train_operand_columns.hpp"

namespace fp8lab {

std::vector<ColumnDef> train_run_columns(std::int64_t steps, int model_layers) {
  using T = ColumnDef::Type;
  ExtraDimension step{"step", "training step (0-based)", "1", {}, {}};
  for (std::int64_t s = 0; s < steps; ++s) step.numbers.push_back(s);
  std::vector<ColumnDef> columns{{"train_loss", T::f64, "nat", "training loss: mean cross-entropy over the step's batch x seq_len targets", step},
          {"val_loss", T::f64, "nat", "validation loss after the step (NaN where not evaluated)", step},
          {"grad_norm", T::f64, "1", "global L2 norm of the mean gradient (unscaled, before clipping)", step},
          {"learning_rate", T::f64, "1", "learning rate of the step", step},
          {"loss_scale", T::f64, "1", "loss scale of the step's backward (1 but for the fp16 recipe)", step},
          {"skipped", T::f64, "1", "1 when the step's update was not applied (overflow or divergence)", step},
          {"diverged", T::f64, "1", "1 when the step's loss or gradient was not finite", step},
          {"step_seconds", T::f64, "s", "wall time of the step", step},
          {"tokens_per_second", T::f64, "1/s", "training tokens (batch x seq_len) per second of the step", step},
          {"step_peak_bytes", T::f64, "byte", "the engine ledger's peak over the step's sequences", step},
          {"resident_peak_bytes", T::f64, "byte",
           "the process's resident-set high-water mark over the step, validation included (VmHWM reset at the step's "
           "start; 0 where the OS does not report it)", step},
          // The seed techniques (harness/train/seed_techniques.hpp).
          {"fp8_flop_fraction", T::f64, "1", "share of the linear layers' GEMM FLOPs run in an FP8 (or narrower) format", step},
          {"gemms_high_precision", T::f64, "1", "adaptive precision: (layer, GEMM kind) pairs held in BF16 after the step", step},
          {"compression_ratio", T::f64, "1", "bits each worker sent for the all-reduce / 32 x parameters (1: uncompressed FP32)", step},
          {"bytes_sent_per_worker", T::f64, "byte", "bytes one simulated data-parallel worker sent for the step's all-reduce", step},
          {"update_fraction", T::f64, "1", "parameters whose optimizer update was applied (sparse updates; 0 on a skipped step)", step},
          {"optimizer_flops", T::f64, "1", "FLOPs of the optimizer's element loops that ran", step},
          {"zero_weight_fraction", T::f64, "1", "trained weights exactly 0 after the step", step},
          // FP8 operand statistics (harness/train/training_record.hpp), NaN where not sampled
          // or where the recipe runs no FP8 GEMM of the kind.
          {"final_train_loss", T::f64, "nat", "training loss of the last step"},
          {"final_val_loss", T::f64, "nat", "validation loss after the last step (NaN without validation)"},
          {"steps_skipped", T::i64, "1", "updates not applied"},
          {"steps_diverged", T::i64, "1", "steps whose loss or gradient was not finite"},
          {"parameters", T::i64, "1", "trained parameters"},
          {"peak_bytes", T::i64, "byte", "engine step peak + FP32 master weights + moments + gradient accumulators"},
          {"optimizer_state_bytes", T::i64, "byte", "AdamW moments in their storage format"},
          {"resident_over_ledger", T::f64, "1",
           "max over the steps of resident_peak_bytes, over peak_bytes (the memory target: <= 2, a resident set within "
           "twice the ledger's peak; NaN where the OS does not report it)"},
          {"resident_before_run_bytes", T::i64, "byte",
           "the process's resident set as the run began: code, libraries, token streams, the initial weights (0 where "
           "the OS does not report it)"},
          {"resident_growth_over_ledger", T::f64, "1",
           "max over the steps of resident_peak_bytes, less resident_before_run_bytes, over peak_bytes: the memory the run "
           "added to the process against the ledger (a resumed run: its own process's steps only; NaN where the OS does "
           "not report it)"},
          {"median_tokens_per_second", T::f64, "1/s", "median over the steps"},
          {"train_tokens", T::str, "", "the training token stream and its sha256"},
          {"precision_switches", T::i64, "1", "adaptive precision: switches the controller made"},
          {"switch_log", T::str, "", "adaptive precision: every switch, one per line (step, layer, GEMM, statistic, new precision)"},
          {"mean_fp8_flop_fraction", T::f64, "1", "fp8_flop_fraction averaged over the steps"},
          {"error_feedback_bytes_per_worker", T::i64, "byte", "the error-feedback residuals one worker keeps (0 without)"}};
  for (ColumnDef& c : operand_stats_columns(step, model_layers)) columns.push_back(std::move(c));
  return columns;
}

Row train_run_row(const train::TrainingRunResult& run, int model_layers, const std::string& train_tokens) {
  Row row;
  std::map<std::string, std::vector<double>> series;
  for (const train::StepRecord& s : run.steps) {
    series["train_loss"].push_back(s.train_loss);
    series["val_loss"].push_back(s.val_loss);
    series["grad_norm"].push_back(s.grad_norm);
    series["learning_rate"].push_back(s.lr);
    series["loss_scale"].push_back(s.loss_scale);
    series["skipped"].push_back(s.skipped ? 1.0 : 0.0);
    series["diverged"].push_back(s.diverged ? 1.0 : 0.0);
    series["step_seconds"].push_back(s.step_seconds);
    series["tokens_per_second"].push_back(s.tokens_per_second);
    series["step_peak_bytes"].push_back(static_cast<double>(s.step_peak_bytes));
    series["resident_peak_bytes"].push_back(static_cast<double>(s.resident_peak_bytes));
    series["fp8_flop_fraction"].push_back(s.fp8_flop_fraction);
    series["gemms_high_precision"].push_back(s.gemms_high_precision);
    series["compression_ratio"].push_back(s.compression_ratio);
    series["bytes_sent_per_worker"].push_back(s.bytes_sent_per_worker);
    series["update_fraction"].push_back(s.update_fraction);
    series["optimizer_flops"].push_back(s.optimizer_flops);
    series["zero_weight_fraction"].push_back(s.zero_weight_fraction);
  }
  add_operand_stats(run.steps, model_layers, row);
  std::int64_t skipped = 0, diverged = 0;
  for (const train::StepRecord& s : run.steps) skipped += s.skipped, diverged += s.diverged;
  std::vector<double> rates = series["tokens_per_second"];
  std::nth_element(rates.begin(), rates.begin() + static_cast<std::ptrdiff_t>(rates.size() / 2), rates.end());
  row["final_train_loss"] = run.steps.back().train_loss;
  row["final_val_loss"] = run.steps.back().val_loss;
  for (auto& [name, values] : series) row[name] = std::move(values);
  row["steps_skipped"] = skipped;
  row["steps_diverged"] = diverged;
  row["parameters"] = static_cast<std::int64_t>(run.parameters);
  row["peak_bytes"] = static_cast<std::int64_t>(run.peak_bytes);
  row["optimizer_state_bytes"] = static_cast<std::int64_t>(run.optimizer_state_bytes);
  std::size_t resident_peak = 0;
  for (const train::StepRecord& s : run.steps) resident_peak = std::max(resident_peak, s.resident_peak_bytes);
  row["resident_over_ledger"] = resident_peak == 0 || run.peak_bytes == 0
                                    ? std::numeric_limits<double>::quiet_NaN()
                                    : static_cast<double>(resident_peak) / static_cast<double>(run.peak_bytes);
  // The growth compares this process's steps with this process's baseline: a resumed run's
  // earlier steps were measured by another process.
  std::size_t own_peak = 0;
  for (std::size_t i = static_cast<std::size_t>(run.resumed_at_step); i < run.steps.size(); ++i)
    own_peak = std::max(own_peak, run.steps[i].resident_peak_bytes);
  row["resident_before_run_bytes"] = static_cast<std::int64_t>(run.resident_before_run_bytes);
  row["resident_growth_over_ledger"] =
      own_peak == 0 || run.peak_bytes == 0 || run.resident_before_run_bytes == 0
          ? std::numeric_limits<double>::quiet_NaN()
          : (static_cast<double>(own_peak) - static_cast<double>(run.resident_before_run_bytes)) / static_cast<double>(run.peak_bytes);
  row["median_tokens_per_second"] = rates[rates.size() / 2];
  row["train_tokens"] = train_tokens;
  row["precision_switches"] = static_cast<std::int64_t>(run.switches.size());
  std::string log;
  for (const train::PrecisionSwitch& w : run.switches)
    log += "step " + std::to_string(w.step) + " " + w.layer + " " + train::gemm_kind_name(w.kind) + " -> " +
           (w.to_fp8 ? "fp8" : "bf16") + " (statistic " + std::to_string(w.statistic) + ")\n";
  row["switch_log"] = log;
  double fp8_sum = 0;
  for (const train::StepRecord& s : run.steps) fp8_sum += s.fp8_flop_fraction;
  row["mean_fp8_flop_fraction"] = fp8_sum / static_cast<double>(run.steps.size());
  row["error_feedback_bytes_per_worker"] = static_cast<std::int64_t>(run.error_feedback_bytes_per_worker);
  return row;
}

}  // namespace fp8lab
