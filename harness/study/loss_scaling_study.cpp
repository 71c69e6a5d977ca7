// Study kind "loss_scaling": what a loss scale 2^s does to gradients stored in a narrow format.
// For every point: the gradient tensor (real stories260K or synthetic log-normal), multiplied
// by 2^s in FP32, stored in the gradient format, read back, unscaled; metrics from
// harness/study/gradient_format_loss.hpp (flushed / overflowed / subnormal fractions of the nonzero
// values, relative Frobenius error against the FP64 gradient).
//
// Tensors (axis `tensor`): the real gradients of harness/study/real_gradients.hpp ("L0.wq.dW",
// "L3.w2.dY", "embedding.dW", "classifier.dY", ...) and "lognormal": rows x cols values
//   g = sign * 2^(median_log2 + sigma * z),  z ~ N(0, 1), sign = +-1 with probability 1/2,
// z and the sign from data/synthetic_tensors.hpp's seeded Gaussian (seeds 2*seed and
// 2*seed + 1), so log2|g| is normal with mean median_log2 and standard deviation `sigma`
// octaves; g is formed in FP64 (the reference) and rounded once to FP32.
// `sigma` and `seed` shape only the log-normal tensor, so they are parameter axes of
// tensor = "lognormal" (harness/study/grid.hpp): the `tensor` dimension holds each real tensor
// once and "lognormal[sigma=S,seed=N]" for each combination, with `sigma` and `seed` as
// coordinates along it; no grid cell repeats a real tensor.
//
// Settings: [lognormal] rows, cols, median_log2; [real] attention ("naive", the default, or
// "flash": the attention of the engine step that gives the real .dW gradients,
// kernels/train/attention_kind.hpp; also the root attribute `attention`).
//
// FP8 with current scaling (e4m3:tensor, e5m2:tile:1x128, ...) divides by the tensor's or
// tile's own amax, so the loss scale cancels up to the FP32 rounding of the scale factor: its
// rows are flat in s, which is the point of showing them beside FP16's window.
#include <cmath>
#include <limits>

#include "data/synthetic_tensors.hpp"
#include "harness/metrics/error_metrics.hpp"
#include "harness/study/gradient_format_loss.hpp"
#include "harness/study/integer_axis_value.hpp"
#include "harness/study/real_gradients.hpp"
#include "harness/study/study_kind.hpp"

namespace fp8lab {
namespace {

constexpr const char* kLognormal = "lognormal";
constexpr int kMinLog2Scale = 0, kMaxLog2Scale = 64;
constexpr int kMaxSigma = 32;

std::int64_t parse_integer(const std::string& axis, const std::string& v, std::int64_t low, std::int64_t high) {
  const std::int64_t x = parse_integer_axis_value(axis, v);
  if (x < low || x > high)
    throw std::invalid_argument(axis + " " + v + " is outside " + std::to_string(low) + ".." + std::to_string(high));
  return x;
}

class LossScalingStudy final : public StudyKind {
 public:
  std::string name() const override { return "loss_scaling"; }

  std::vector<AxisDef> axes() const override {
    std::vector<std::string> scales;
    for (int s = 0; s <= 24; ++s) scales.push_back(std::to_string(s));
    return {{"tensor", {kLognormal}, "gradient tensor (stories260K real .dW / .dY, or lognormal)"},
            {"sigma", {"4"}, "lognormal: standard deviation of log2|g| (octaves)", AxisStorage::integer,
             ParameterOf{"tensor", {kLognormal}}},
            {"seed", {"1"}, "lognormal: seed", AxisStorage::integer, ParameterOf{"tensor", {kLognormal}}},
            {"format", {"fp16", "bf16", "e5m2", "e4m3:tensor", "e5m2:tensor", "e4m3:tile:1x128", "e5m2:tile:1x128"},
             "gradient format (a cast, or FP8 with current scaling of the given granularity)"},
            {"log2_scale", scales, "log2 of the loss scale", AxisStorage::integer}};
  }

  void validate_value(const std::string& axis, const std::string& v) const override {
    if (axis == "tensor") {
      if (v != kLognormal) find_real_gradient(v);
    } else if (axis == "sigma") {
      parse_integer("sigma", v, 0, kMaxSigma);
    } else if (axis == "seed") {
      parse_integer("seed", v, 0, std::numeric_limits<std::int64_t>::max());
    } else if (axis == "format") {
      parse_gradient_format(v);
    } else if (axis == "log2_scale") {
      parse_integer("log2_scale", v, kMinLog2Scale, kMaxLog2Scale);
    }
  }

  void configure(const StudySpec& spec) override {
    rows_ = spec.get_int("lognormal.rows", 256);
    cols_ = spec.get_int("lognormal.cols", 1024);
    median_log2_ = spec.get_int("lognormal.median_log2", -20);
    if (rows_ < 1 || rows_ > (1 << 16)) throw spec.error("lognormal.rows", "must be in 1..65536");
    if (cols_ < 1 || cols_ > (1 << 16)) throw spec.error("lognormal.cols", "must be in 1..65536");
    if (median_log2_ < -120 || median_log2_ > 100) throw spec.error("lognormal.median_log2", "must be in -120..100");
    try {
      attention_ = train::parse_attention_kind(spec.get_string("real.attention", "naive"));
    } catch (const std::invalid_argument& e) {
      throw spec.error("real.attention", e.what());
    }
  }

  void check_grid(const StudySpec&, const std::vector<Point>&) const override {}

  std::optional<std::string> skip_reason(const Point&, const Backend&) const override { return std::nullopt; }

  std::vector<ColumnDef> result_columns() const override {
    using T = ColumnDef::Type;
    return {{"source", T::str, "", "gradient source: real or lognormal"},
            {"gradient", T::str, "", "weight, activation (real) or synthetic"},
            {"rows", T::i64, "1", "tensor rows"},
            {"cols", T::i64, "1", "tensor columns (tiles run along a row)"},
            {"nonzero", T::i64, "1", "nonzero values of the FP32 gradient"},
            {"flushed_count", T::i64, "1", "nonzero values that read back as zero"},
            {"overflowed_count", T::i64, "1", "values that overflowed (see overflow_rule)"},
            {"subnormal_count", T::i64, "1", "values stored as subnormals of the format"},
            {"flushed_fraction", T::f64, "1", "fraction of nonzero values flushed to zero"},
            {"overflowed_fraction", T::f64, "1", "fraction of nonzero values overflowed"},
            {"subnormal_fraction", T::f64, "1", "fraction of nonzero values stored as subnormals"},
            {"rel_frobenius", T::f64, "1",
             "relative Frobenius error of the unscaled stored gradient vs FP64 (NaN when a value became inf)"},
            {"format_rel_frobenius", T::f64, "1", "the same vs the FP32 gradient: the format and scale alone"},
            {"fp32_rel_frobenius", T::f64, "1", "relative Frobenius error of the FP32 gradient itself vs FP64"},
            {"amax", T::f64, "same as the gradient", "largest |g| of the FP32 gradient"},
            {"min_nonzero_abs", T::f64, "same as the gradient", "smallest nonzero |g| of the FP32 gradient"},
            {"loss_scale", T::f64, "1", "the loss scale 2^log2_scale"},
            {"format_max", T::f64, "1", "largest finite value of the format"},
            {"overflow_rule", T::str, "", "what counts as overflowed in this format"}};
  }

  Row skipped_row(const Point&) const override { return {}; }

  Row evaluate(const Point& p, const RunContext&) override {
    const Tensor& t = tensor(p);
    const GradientFormat format = parse_gradient_format(p.at("format"));
    const int s = static_cast<int>(std::stoll(p.at("log2_scale")));
    const GradientFormatLoss loss = gradient_format_loss(t.fp32, t.fp64, t.rows, t.cols, format, s);
    Row row;
    row["source"] = std::string(p.at("tensor") == kLognormal ? "lognormal" : "real");
    row["gradient"] = t.gradient;
    row["rows"] = t.rows;
    row["cols"] = t.cols;
    row["nonzero"] = loss.nonzero;
    row["flushed_count"] = loss.flushed;
    row["overflowed_count"] = loss.overflowed;
    row["subnormal_count"] = loss.subnormal;
    row["flushed_fraction"] = loss.flushed_fraction;
    row["overflowed_fraction"] = loss.overflowed_fraction;
    row["subnormal_fraction"] = loss.subnormal_fraction;
    row["rel_frobenius"] = loss.rel_frobenius;
    row["format_rel_frobenius"] = loss.format_rel_frobenius;
    row["fp32_rel_frobenius"] = t.fp32_rel_frobenius;
    row["amax"] = t.amax;
    row["min_nonzero_abs"] = t.min_nonzero_abs;
    row["loss_scale"] = std::ldexp(1.0, s);
    row["format_max"] = format.max_finite();
    row["overflow_rule"] = std::string(format.saturates() ? "rounds beyond format max (before saturation to max)"
                                                          : "rounds to inf");
    return row;
  }

  double point_cost(const Point& p) const override {
    if (p.at("tensor") == kLognormal) return static_cast<double>(rows_ * cols_);
    const RealGradient& g = find_real_gradient(p.at("tensor"), attention_);
    return static_cast<double>(g.rows * g.cols);
  }

  MemoryEstimate memory_estimate(const Point& p) const override {
    if (p.at("tensor") != kLognormal) return {};
    // FP64 reference + FP32 gradient, and five FP32/FP64 working copies in gradient_format_loss.
    return {static_cast<std::uint64_t>(rows_ * cols_) * 48, "lognormal.rows"};
  }

  std::map<std::string, std::string> settings_attributes() const override {
    return {{"attention", train::attention_kind_name(attention_)}};
  }

  std::string operand_description() const override {
    return "real stories260K gradients (harness/study/real_gradients.hpp) and/or synthetic lognormal gradients "
           "g = sign * 2^(median_log2 + sigma z), z ~ N(0,1), per point in the `operands` variable";
  }

  std::string operand_provenance(const Point& p) const override {
    if (p.at("tensor") != kLognormal) return find_real_gradient(p.at("tensor"), attention_).source;
    return "synthetic lognormal gradient " + std::to_string(rows_) + "x" + std::to_string(cols_) +
           ": g = sign * 2^(" + std::to_string(median_log2_) + " + " + p.at("sigma") +
           " z), z ~ N(0,1) and sign from data/synthetic_tensors gaussian seeds " +
           std::to_string(2 * std::stoull(p.at("seed"))) + "/" + std::to_string(2 * std::stoull(p.at("seed")) + 1) +
           ", formed in FP64, rounded once to FP32; seed=" + p.at("seed");
  }

 private:
  struct Tensor {
    std::string key, gradient;
    std::int64_t rows = 0, cols = 0;
    std::vector<float> fp32;
    std::vector<double> fp64;
    double fp32_rel_frobenius = 0, amax = 0, min_nonzero_abs = 0;
  };

  const Tensor& tensor(const Point& p) {
    std::string key = p.at("tensor");
    if (key == kLognormal) key += "|" + p.at("sigma") + "|" + p.at("seed");
    if (cached_.key == key) return cached_;
    Tensor t;
    t.key = key;
    if (p.at("tensor") == kLognormal) {
      const std::uint64_t seed = std::stoull(p.at("seed"));
      const double sigma = static_cast<double>(std::stoll(p.at("sigma")));
      const std::vector<float> z = synthesize({rows_, cols_, "gaussian", 0, 1.0, 2 * seed});
      const std::vector<float> sign = synthesize({rows_, cols_, "gaussian", 0, 1.0, 2 * seed + 1});
      t.gradient = "synthetic";
      t.rows = rows_;
      t.cols = cols_;
      for (std::size_t i = 0; i < z.size(); ++i) {
        const double g = std::copysign(std::exp2(static_cast<double>(median_log2_) + sigma * z[i]), sign[i]);
        t.fp64.push_back(g);
        t.fp32.push_back(static_cast<float>(g));
      }
    } else {
      const RealGradient& g = find_real_gradient(p.at("tensor"), attention_);
      t.gradient = g.gradient;
      t.rows = g.rows;
      t.cols = g.cols;
      t.fp32 = g.fp32;
      t.fp64 = g.fp64;
    }
    t.fp32_rel_frobenius = error_metrics(std::span<const float>(t.fp32), std::span<const double>(t.fp64), 0.0).rel_frobenius;
    t.min_nonzero_abs = std::numeric_limits<double>::infinity();
    for (const float v : t.fp32) {
      t.amax = std::max(t.amax, static_cast<double>(std::fabs(v)));
      if (v != 0.0f) t.min_nonzero_abs = std::min(t.min_nonzero_abs, static_cast<double>(std::fabs(v)));
    }
    if (std::isinf(t.min_nonzero_abs)) t.min_nonzero_abs = std::numeric_limits<double>::quiet_NaN();
    cached_ = std::move(t);
    return cached_;
  }

  std::int64_t rows_ = 256, cols_ = 1024, median_log2_ = -20;
  train::AttentionKind attention_ = train::AttentionKind::naive;
  Tensor cached_;
};

}  // namespace

std::unique_ptr<StudyKind> make_loss_scaling_study() { return std::make_unique<LossScalingStudy>(); }

}  // namespace fp8lab
