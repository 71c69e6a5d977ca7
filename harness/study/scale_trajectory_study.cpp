// Study kind "scale_trajectory": how the loss scale moves over a short fp16 training run of
// stories260K (harness/study/scale_trajectory.hpp), for the PyTorch GradScaler rules, Megatron's
// hysteresis rules and FP8 per-tensor delayed scaling of the gradients. Writes `scale`,
// `found_inf`, `skipped` and `loss` along a trailing `step` dimension.
//
// Settings: [training] steps, learning_rate, tokens (per step), stream_tokens, attention
// ("naive", the default, or "flash": the engine step's attention, kernels/train/attention_kind.hpp;
// also the root attribute `attention`);
// [scaler] initial_scale, growth_factor, backoff_factor, hysteresis, min_scale (megatron only:
// hysteresis and min_scale); [delayed] history_length, margin, reduction, format, tensor,
// loss_scale. Every bad value is refused naming the field (exit 2).
#include <algorithm>
#include <cmath>
#include <limits>

#include "harness/study/integer_axis_value.hpp"
#include "harness/study/scale_trajectory.hpp"
#include "harness/study/study_kind.hpp"
#include "harness/train/llama2c_weights.hpp"
#include "kernels/train/model_config.hpp"

namespace fp8lab {
namespace {

std::int64_t parse_whole(const std::string& axis, const std::string& v, std::int64_t low) {
  const std::int64_t x = parse_integer_axis_value(axis, v);
  if (x < low) throw std::invalid_argument(axis + " " + v + " must be >= " + std::to_string(low));
  return x;
}

// "loss scaler: field 'F': ..." / "delayed scaling: field 'F': ..." -> F.
std::string field_of(const std::string& message) {
  const std::size_t at = message.find("field '");
  if (at == std::string::npos) return "";
  const std::size_t end = message.find('\'', at + 7);
  return message.substr(at + 7, end - at - 7);
}

class ScaleTrajectoryStudy final : public StudyKind {
 public:
  std::string name() const override { return "scale_trajectory"; }

  std::vector<AxisDef> axes() const override {
    return {{"scaler", {"pytorch", "megatron", "fp8_delayed"}, "scaling rule: pytorch GradScaler, megatron hysteresis, FP8 delayed"},
            {"growth_interval", {"20", "50"}, "clean steps before the loss scale grows", AxisStorage::integer},
            {"overflow_every", {"0"}, "an inf injected into one gradient every this many steps (0: never)", AxisStorage::integer},
            {"seed", {"1"}, "seed of the token windows and of the injected overflows' positions", AxisStorage::integer}};
  }

  void validate_value(const std::string& axis, const std::string& v) const override {
    if (axis == "scaler") {
      if (v != "pytorch" && v != "megatron" && v != "fp8_delayed")
        throw std::invalid_argument("scaler '" + v + "' is not one of pytorch, megatron, fp8_delayed");
    } else if (axis == "growth_interval") {
      parse_whole("growth_interval", v, 1);
    } else if (axis == "overflow_every" || axis == "seed") {
      parse_whole(axis, v, 0);
    }
  }

  void configure(const StudySpec& spec) override {
    base_.steps = spec.get_int("training.steps", 200);
    base_.learning_rate = static_cast<float>(spec.get_double("training.learning_rate", 0.05));
    base_.tokens = spec.get_int("training.tokens", 64);
    base_.stream_tokens = spec.get_int("training.stream_tokens", 160);
    if (base_.steps < 1 || base_.steps > 100000) throw spec.error("training.steps", "must be in 1..100000");
    if (!(base_.learning_rate > 0) || !std::isfinite(base_.learning_rate))
      throw spec.error("training.learning_rate", "must be a finite number > 0");
    if (base_.tokens < 2 || base_.tokens > 256) throw spec.error("training.tokens", "must be in 2..256");
    if (base_.stream_tokens < base_.tokens || base_.stream_tokens > 512)
      throw spec.error("training.stream_tokens", "must be in tokens..512");
    try {
      base_.attention = train::parse_attention_kind(spec.get_string("training.attention", "naive"));
    } catch (const std::invalid_argument& e) {
      throw spec.error("training.attention", e.what());
    }

    initial_scale_ = spec.get_double("scaler.initial_scale", 65536.0);
    growth_factor_ = spec.get_double("scaler.growth_factor", 2.0);
    backoff_factor_ = spec.get_double("scaler.backoff_factor", 0.5);
    hysteresis_ = spec.get_int("scaler.hysteresis", 2);
    min_scale_ = spec.get_double("scaler.min_scale", 1.0);
    for (const char* variant : {"pytorch", "megatron"}) check_scaler(spec, variant);

    DelayedScalingConfig& d = base_.delayed;
    d.history_length = spec.get_int("delayed.history_length", 16);
    d.margin = static_cast<int>(std::clamp<std::int64_t>(spec.get_int("delayed.margin", 0), -1, 65));
    try {
      d.format = parse_fp8_format(spec.get_string("delayed.format", "e5m2"));
    } catch (const std::invalid_argument& e) {
      throw spec.error("delayed.format", e.what());
    }
    try {
      d.reduction = parse_amax_reduction(spec.get_string("delayed.reduction", "max"));
    } catch (const std::invalid_argument& e) {
      throw spec.error("delayed.reduction", e.what());
    }
    try {
      d.validate();
    } catch (const std::invalid_argument& e) {
      throw spec.error("delayed." + field_of(e.what()), e.what());
    }
    base_.delayed_tensor = spec.get_string("delayed.tensor", "L2.w1");
    const std::vector<std::string> linears = train::linear_layer_names(train::model_preset("stories260K"));
    if (std::find(linears.begin(), linears.end(), base_.delayed_tensor) == linears.end() || base_.delayed_tensor == "classifier")
      throw spec.error("delayed.tensor", "'" + base_.delayed_tensor + "' is not a linear weight of stories260K (L0..L4 .wq .wk .wv .wo .w1 .w2 .w3)");
    base_.delayed_loss_scale = spec.get_double("delayed.loss_scale", 1024.0);
    if (!(base_.delayed_loss_scale > 0) || !(base_.delayed_loss_scale <= std::numeric_limits<float>::max()))
      throw spec.error("delayed.loss_scale", "must be > 0 and within FP32");
  }

  void check_grid(const StudySpec&, const std::vector<Point>&) const override {}

  std::optional<std::string> skip_reason(const Point&, const Backend&) const override { return std::nullopt; }

  std::vector<ColumnDef> result_columns() const override {
    using T = ColumnDef::Type;
    ExtraDimension step{"step", "training step", "1", {}, {}};
    for (std::int64_t s = 0; s < base_.steps; ++s) step.numbers.push_back(s);
    return {{"scale", T::f64, "1", "loss scale of the step's backward (fp8_delayed: the recorded tensor's FP8 scale)", step},
            {"found_inf", T::f64, "1", "1 when the step's gradients held an inf or NaN", step},
            {"skipped", T::f64, "1", "1 when the step's optimizer update was skipped", step},
            {"loss", T::f64, "1", "cross-entropy loss of the step's forward (nats per token, unscaled)", step},
            {"saturated_tensors", T::f64, "1", "fp8_delayed: weight gradients with a value beyond the FP8 max (NaN otherwise)", step},
            {"steps_skipped", T::i64, "1", "optimizer updates skipped over the run"},
            {"final_scale", T::f64, "1", "scale after the last step's update"},
            {"final_loss", T::f64, "1", "loss of the last step"}};
  }

  Row skipped_row(const Point&) const override { return {}; }

  Row evaluate(const Point& p, const RunContext&) override {
    const Trajectory t = run_scale_trajectory(config(p));
    Row row;
    row["scale"] = t.scale;
    row["found_inf"] = t.found_inf;
    row["skipped"] = t.skipped;
    row["loss"] = t.loss;
    row["saturated_tensors"] = t.saturated_tensors;
    std::int64_t skipped = 0;
    for (double s : t.skipped) skipped += s != 0;
    row["steps_skipped"] = skipped;
    row["final_scale"] = t.scale.back();
    row["final_loss"] = t.loss.back();
    return row;
  }

  double point_cost(const Point&) const override { return static_cast<double>(base_.steps); }

  std::map<std::string, std::string> settings_attributes() const override {
    return {{"attention", train::attention_kind_name(base_.attention)}};
  }

  std::string operand_description() const override {
    return std::string("stories260K real weights, checkpoint=") + kStories260kSha256 +
           " (sha256), trained with SGD; token windows of its greedy continuation of BOS";
  }

  std::string operand_provenance(const Point& p) const override {
    const char* inject = p.at("overflow_every") == "0" ? "no injected overflow"
                                                       : "synthetic overflow: +inf in one gradient element every k steps";
    return "stories260K real weights (checkpoint sha256 " + std::string(kStories260kSha256) + "), fp16 recipe, " +
           std::to_string(base_.steps) + " SGD steps of " + std::to_string(base_.tokens) +
           " tokens from its greedy continuation of BOS; " + inject + "; seed=" + p.at("seed");
  }

 private:
  LossScalerConfig scaler_config(const std::string& variant, std::int64_t growth_interval) const {
    LossScalerConfig s = variant == "megatron" ? LossScalerConfig::megatron() : LossScalerConfig::pytorch();
    s.initial_scale = initial_scale_;
    s.growth_factor = growth_factor_;
    s.backoff_factor = backoff_factor_;
    s.growth_interval = growth_interval;
    if (variant == "megatron") {
      s.hysteresis = hysteresis_;
      s.min_scale = min_scale_;
    }
    return s;
  }

  void check_scaler(const StudySpec& spec, const std::string& variant) const {
    try {
      scaler_config(variant, 1).validate();
    } catch (const std::invalid_argument& e) {
      throw spec.error("scaler." + field_of(e.what()), e.what());
    }
  }

  TrajectoryConfig config(const Point& p) const {
    TrajectoryConfig c = base_;
    c.variant = p.at("scaler");
    c.scaler = scaler_config(c.variant == "megatron" ? "megatron" : "pytorch", std::stoll(p.at("growth_interval")));
    c.overflow_every = std::stoll(p.at("overflow_every"));
    c.seed = std::stoull(p.at("seed"));
    return c;
  }

  TrajectoryConfig base_;
  double initial_scale_ = 65536.0, growth_factor_ = 2.0, backoff_factor_ = 0.5, min_scale_ = 1.0;
  std::int64_t hysteresis_ = 2;
};

}  // namespace

std::unique_ptr<StudyKind> make_scale_trajectory_study() { return std::make_unique<ScaleTrajectoryStudy>(); }

}  // namespace fp8lab
