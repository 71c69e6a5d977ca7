// Study kind "formats": every quantization scheme and scale rule fp8lab has, on real stories260K
// tensors and on synthetic tensors with outlier channels. One point quantizes one tensor with one
// quantizer and one rounding, and records
//   - its error against the tensor's FP64 value (harness/metrics/error_metrics.hpp);
//   - the fraction of blocks whose largest element the format's saturation clips, and of those
//     whose scaled maximum is above fmt_max (harness/metrics/format_metrics.hpp defines both);
//   - the "UE8M0 tax": the same format, granularity and rounding with the `pow2` (UE8M0,
//     DeepGEMM's ceil_to_ue8m0) scale rule against the `fp32` rule, as SQNR lost (dB) and as the
//     ratio of relative Frobenius errors; on the `deepseek` scheme this is DeepSeek-V3's 1x128
//     activations / 128x128 weights (the value depends on the quantizer's format and
//     granularity only, not its rule);
//   - against every scale rule in turn (extra dimension `versus_rule`), with the same format,
//     granularity and rounding: the fraction of codes, of dequantized values and of tile scales
//     that differ (NaN where that rule cannot serve the format, the tiles or the rounding).
//
// Axes: `tensor` ("<linear>.W" the checkpoint's weight, out x in; "<linear>.X" its input and
// "<linear>.dY" its output gradient, T x in / T x out, from the FP64 forward/backward of
// harness/study/real_layers; "outliers" a synthetic tensor), `outlier_scale` and `seed` (parameter axes
// of "outliers", harness/study/grid.hpp), `rounding` (nearest, stochastic: draws from
// [stochastic] seed), `quantizer` (harness/study/formats_quantizer.hpp: a scheme, whose
// granularity follows the tensor's role, or FORMAT/GRANULARITY/RULE).
// "outliers": [synthetic] rows x cols from `distribution` (data/synthetic_tensors.hpp) with
// `outlier_channels` columns scaled by `outlier_scale`, an activation (its columns run along K).
// The quantizer sees FP32 values; real activations and gradients are FP64 rounded once to FP32,
// and every error is against the FP64 value (the FP32 value itself for weights and outliers).
//
// A GEMM-error axis (accumulator width: Hopper's 13 bits, B200's 25, FP32) is left to a later
// slice. It would be an axis `gemm` (default "none"; fprop, dgrad, wgrad) whose non-none values
// take a real layer's X, W and dY together (tensor values naming a layer, not one tensor), with
// `accum` as a parameter axis of those values (ParameterOf{"gemm", ...}), and the three errors
// of harness/metrics/gemm_errors as columns, NaN at gemm = "none"; the columns here stay as they are.
#include <cmath>
#include <limits>

#include "data/synthetic_tensors.hpp"
#include "harness/metrics/error_metrics.hpp"
#include "harness/metrics/format_metrics.hpp"
#include "harness/requests/quantize_request.hpp"
#include "harness/study/formats_quantizer.hpp"
#include "harness/study/formats_tensors.hpp"
#include "harness/study/integer_axis_value.hpp"
#include "harness/study/study_kind.hpp"
#include "kernels/cpu/quantize.hpp"

namespace fp8lab {
namespace {

// Quantizations of the current tensor kept for reuse by the points that follow; one point needs
// at most 16 (its own, fp32 and pow2, and the 13 rules it is compared with).
constexpr std::size_t kMaxCached = 48, kPerPoint = 16;

std::int64_t parse_integer(const std::string& axis, const std::string& v, std::int64_t low) {
  const std::int64_t x = parse_integer_axis_value(axis, v);
  if (x < low) throw std::invalid_argument(axis + " " + v + " is below " + std::to_string(low));
  return x;
}

// Why `rule` cannot quantize this tensor's tiles with this rounding (nullopt: it can).
std::optional<std::string> refusal(ScaleRule rule, ElementFormat format, std::int64_t tile_rows, std::int64_t tile_cols,
                                   bool stochastic) {
  try {
    check_rule_serves_format(rule, format);
    check_rule_serves_tiles(rule, tile_rows, tile_cols, stochastic);
  } catch (const std::invalid_argument& e) {
    return std::string(e.what());
  }
  return std::nullopt;
}

// Where the spec lists `value` on `axis`, for errors found after the grid was expanded.
const toml::source_region* position_of(const StudySpec& spec, const std::string& axis, const std::string& value) {
  for (const Axis& a : spec.axes)
    for (std::size_t i = 0; a.name == axis && i < a.values.size(); ++i)
      if (a.values[i] == value) return &a.positions[i];
  return nullptr;
}

class FormatsStudy final : public StudyKind {
 public:
  std::string name() const override { return "formats"; }

  std::vector<AxisDef> axes() const override {
    const ParameterOf of_outliers{"tensor", {kOutliersTensor}};
    return {{"tensor", {kOutliersTensor}, "tensor (stories260K <linear>.W / .X / .dY, or synthetic outliers)"},
            {"outlier_scale", {"100"}, "outliers: factor of the outlier columns", AxisStorage::integer, of_outliers},
            {"seed", {"1"}, "outliers: seed of the synthetic tensor", AxisStorage::integer, of_outliers},
            {"rounding", {"nearest"}, "rounding of the scaled elements (nearest, stochastic)"},
            {"quantizer", {"deepseek", "mxfp8", "mxfp4", "nvfp4"}, "scheme, or FORMAT/GRANULARITY/RULE"}};
  }

  void validate_value(const std::string& axis, const std::string& v) const override {
    if (axis == "tensor") {
      if (v != kOutliersTensor) find_real_formats_tensor(v);
    } else if (axis == "outlier_scale") {
      parse_integer(axis, v, 1);
    } else if (axis == "seed") {
      parse_integer(axis, v, 0);
    } else if (axis == "rounding") {
      parse_rounding_mode(v);
    } else if (axis == "quantizer") {
      parse_formats_quantizer(v);
    }
  }

  void configure(const StudySpec& spec) override {
    synthetic_.rows = spec.get_int("synthetic.rows", 256);
    synthetic_.cols = spec.get_int("synthetic.cols", 1024);
    synthetic_.outlier_channels = spec.get_int("synthetic.outlier_channels", 8);
    synthetic_.distribution = spec.get_string("synthetic.distribution", "gaussian");
    stochastic_seed_ = static_cast<std::uint64_t>(spec.get_int("stochastic.seed", 1));
    if (synthetic_.rows < 1 || synthetic_.rows > (1 << 16)) throw spec.error("synthetic.rows", "must be in 1..65536");
    if (synthetic_.cols < 1 || synthetic_.cols > (1 << 16)) throw spec.error("synthetic.cols", "must be in 1..65536");
    if (synthetic_.outlier_channels < 0 || synthetic_.outlier_channels > synthetic_.cols)
      throw spec.error("synthetic.outlier_channels", "must be in 0..cols (" + std::to_string(synthetic_.cols) + ")");
    try {
      validate({1, 1, synthetic_.distribution, 0, 1.0, 0});
    } catch (const std::invalid_argument& e) {
      throw spec.error("synthetic.distribution", e.what());
    }
    if (spec.get_int("stochastic.seed", 1) < 0) throw spec.error("stochastic.seed", "must be >= 0");
  }

  // A rule that cannot take a tensor's tiles (nvfp4:4over6 beyond 1x16 / 16x16) is the spec's
  // error, not a skip: the quantizer value names both. Only the rounding (an axis of its own)
  // makes a point a skipped combination.
  void check_grid(const StudySpec& spec, const std::vector<Point>& points) const override {
    for (const Point& p : points) {
      const Shape s = shape(p);
      const FormatsQuantizer q = parse_formats_quantizer(p.at("quantizer"));
      const Granularity g = q.granularity_for(s.role);
      try {
        check_rule_serves_tiles(q.rule, g.tile_rows(s.rows), g.tile_cols(s.cols), false);
      } catch (const std::invalid_argument& e) {
        throw spec.error("axes.quantizer",
                         "quantizer '" + q.text + "' on tensor " + p.at("tensor") + " (" + std::to_string(s.rows) +
                             "x" + std::to_string(s.cols) + "): " + e.what(),
                         position_of(spec, "quantizer", q.text));
      }
    }
  }

  std::optional<std::string> skip_reason(const Point& p, const Backend&) const override {
    const Shape s = shape(p);
    const FormatsQuantizer q = parse_formats_quantizer(p.at("quantizer"));
    const Granularity g = q.granularity_for(s.role);
    return refusal(q.rule, q.format, g.tile_rows(s.rows), g.tile_cols(s.cols), p.at("rounding") == "stochastic");
  }

  std::vector<ColumnDef> result_columns() const override {
    using T = ColumnDef::Type;
    std::vector<std::string> rules;
    for (const ScaleRule r : all_scale_rules()) rules.emplace_back(scale_rule_name(r));
    const ExtraDimension versus{"versus_rule", "the other scale rule (same format, granularity, rounding)", "1", {}, rules};
    return {{"source", T::str, "", "real (stories260K) or synthetic"},
            {"role", T::str, "", "weight, activation or gradient (a scheme's granularity follows it)"},
            {"scheme", T::str, "", "the quantizer's scheme (empty for FORMAT/GRANULARITY/RULE)"},
            {"format", T::str, "", "element format"},
            {"granularity", T::str, "", "granularity the quantizer used on this tensor"},
            {"scale_rule", T::str, "", "scale rule"},
            {"rows", T::i64, "1", "tensor rows (tokens or output channels)"},
            {"cols", T::i64, "1", "tensor columns (along K: tiles run along a row)"},
            {"tile_rows", T::i64, "1", "rows one scale covers"},
            {"tile_cols", T::i64, "1", "columns one scale covers"},
            {"blocks", T::i64, "1", "tiles with a nonzero element (the clip fractions' denominator)"},
            {"rel_frobenius", T::f64, "1", "relative Frobenius error of the dequantized tensor vs FP64"},
            {"sqnr_db", T::f64, "dB", "SQNR of the dequantized tensor vs FP64"},
            {"deepgemm_diff", T::f64, "1", "DeepGEMM diff of the dequantized tensor vs FP64"},
            {"max_abs", T::f64, "same as the tensor", "max absolute error vs FP64"},
            {"max_rel", T::f64, "1", "max relative error vs FP64 over |x| > 1% of the tensor's RMS"},
            {"one_minus_cosine", T::f64, "1", "1 - cosine similarity with the FP64 tensor"},
            {"flushed_fraction", T::f64, "1", "fraction of nonzero elements that dequantize to zero"},
            {"over_max_block_fraction", T::f64, "1", "fraction of blocks whose scaled maximum exceeds the format's max"},
            {"clipped_block_fraction", T::f64, "1", "fraction of blocks whose maximum the saturation clips"},
            {"ue8m0_tax_db", T::f64, "dB", "SQNR of the fp32 scale rule minus that of pow2 (UE8M0), same format/tiles"},
            {"ue8m0_tax_ratio", T::f64, "1", "relative Frobenius error of pow2 over that of fp32, same format/tiles"},
            {"amax", T::f64, "same as the tensor", "largest |x| of the FP32 tensor"},
            {"tensor_scale_decode", T::f64, "1", "per-tensor decode factor (two-level nvfp4 rules; 1 otherwise)"},
            {"code_diff_fraction", T::f64, "1", "fraction of element codes that differ from versus_rule's", versus},
            {"value_diff_fraction", T::f64, "1", "fraction of dequantized values that differ from versus_rule's", versus},
            {"scale_diff_fraction", T::f64, "1", "fraction of tile dequantization factors that differ", versus}};
  }

  Row skipped_row(const Point& p) const override {
    const Shape s = shape(p);
    const FormatsQuantizer q = parse_formats_quantizer(p.at("quantizer"));
    const Granularity g = q.granularity_for(s.role);
    return describe(p, q, g, s);
  }

  Row evaluate(const Point& p, const RunContext& context) override {
    const FormatsTensor& t = tensor(p);
    if (cache_.size() + kPerPoint > kMaxCached) cache_.clear();  // never while a point holds references
    const FormatsQuantizer q = parse_formats_quantizer(p.at("quantizer"));
    const Granularity g = q.granularity_for(t.role);
    const Rounding rounding = rounding_of(p);
    const Quantization& own = quantization(t, {q.format, g, q.rule, rounding}, *context.backend);
    Row row = describe(p, q, g, {t.rows, t.cols, t.role});
    const ErrorMetrics& m = own.metrics;
    row["rel_frobenius"] = m.rel_frobenius;
    row["sqnr_db"] = m.sqnr_db;
    row["deepgemm_diff"] = m.deepgemm_diff;
    row["max_abs"] = m.max_abs;
    row["max_rel"] = m.max_rel;
    row["one_minus_cosine"] = m.one_minus_cosine;
    std::int64_t flushed = 0, nonzero = 0;
    for (std::size_t i = 0; i < t.fp32.size(); ++i) {
      nonzero += t.fp32[i] != 0.0f;
      flushed += t.fp32[i] != 0.0f && own.values[i] == 0.0f;
    }
    row["flushed_fraction"] = nonzero > 0 ? static_cast<double>(flushed) / static_cast<double>(nonzero)
                                          : std::numeric_limits<double>::quiet_NaN();
    const BlockClipCounts clip = block_clip_counts(t.fp32, own.q);
    row["blocks"] = clip.blocks;
    row["over_max_block_fraction"] = clip.over_max_fraction();
    row["clipped_block_fraction"] = clip.clipped_fraction();
    const ErrorMetrics fp32 = quantization(t, {q.format, g, ScaleRule::fp32, rounding}, *context.backend).metrics;
    const ErrorMetrics pow2 = quantization(t, {q.format, g, ScaleRule::pow2, rounding}, *context.backend).metrics;
    row["ue8m0_tax_db"] = fp32.sqnr_db - pow2.sqnr_db;
    row["ue8m0_tax_ratio"] = pow2.rel_frobenius / fp32.rel_frobenius;
    row["amax"] = static_cast<double>(t.amax);
    row["tensor_scale_decode"] = static_cast<double>(own.q.tensor_scale.decode);
    std::vector<double> codes, values, scales;
    for (const ScaleRule other : all_scale_rules()) {
      const bool stochastic = rounding.mode == RoundingMode::stochastic;
      if (refusal(other, q.format, own.q.tile_rows, own.q.tile_cols, stochastic)) {
        for (std::vector<double>* v : {&codes, &values, &scales}) v->push_back(std::numeric_limits<double>::quiet_NaN());
        continue;
      }
      const Quantization& b = quantization(t, {q.format, g, other, rounding}, *context.backend);
      const CodeDifference d = code_difference(own.q, own.values, b.q, b.values);
      codes.push_back(d.code_fraction());
      values.push_back(d.value_fraction());
      scales.push_back(d.scale_fraction());
    }
    row["code_diff_fraction"] = codes;
    row["value_diff_fraction"] = values;
    row["scale_diff_fraction"] = scales;
    return row;
  }

  double point_cost(const Point& p) const override {
    const Shape s = shape(p);
    return static_cast<double>(s.rows * s.cols);
  }

  MemoryEstimate memory_estimate(const Point& p) const override {
    const Shape s = shape(p);
    // FP32 + FP64 tensor, and per cached quantization one code byte and one FP32 value per element.
    return {static_cast<std::uint64_t>(s.rows * s.cols) * (12 + 5 * kMaxCached), "synthetic.rows"};
  }

  std::map<std::string, std::string> settings_attributes() const override {
    return {{"stochastic_seed", std::to_string(stochastic_seed_)}};
  }

  std::string operand_description() const override {
    return "real stories260K weights, activations and activation gradients (harness/study/real_layers.hpp) and/or "
           "synthetic tensors with outlier channels, per point in the `operands` variable";
  }

  std::string operand_provenance(const Point& p) const override {
    if (p.at("tensor") != kOutliersTensor) return find_real_formats_tensor(p.at("tensor")).source;
    return outliers_provenance(synthetic_spec(p));
  }

 private:
  struct Shape {
    std::int64_t rows = 0, cols = 0;
    std::string role;
  };
  struct Quantization {
    QuantizedTensor q;
    std::vector<float> values;  // dequantized
    ErrorMetrics metrics;       // of values vs the FP64 tensor
  };

  SyntheticSpec synthetic_spec(const Point& p) const {
    SyntheticSpec s = synthetic_;
    s.outlier_scale = static_cast<double>(std::stoll(p.at("outlier_scale")));
    s.seed = std::stoull(p.at("seed"));
    return s;
  }

  Shape shape(const Point& p) const {
    if (p.at("tensor") == kOutliersTensor) return {synthetic_.rows, synthetic_.cols, "activation"};
    const FormatsTensor& t = find_real_formats_tensor(p.at("tensor"));
    return {t.rows, t.cols, t.role};
  }

  Rounding rounding_of(const Point& p) const {
    const RoundingMode mode = parse_rounding_mode(p.at("rounding"));
    return {mode, mode == RoundingMode::stochastic ? stochastic_seed_ : 0};
  }

  Row describe(const Point& p, const FormatsQuantizer& q, const Granularity& g, const Shape& s) const {
    Row row;
    row["source"] = std::string(p.at("tensor") == kOutliersTensor ? "synthetic" : "real");
    row["role"] = s.role;
    row["scheme"] = q.scheme;
    row["format"] = std::string(q.format.name());
    row["granularity"] = g.to_string();
    row["scale_rule"] = std::string(scale_rule_name(q.rule));
    row["rows"] = s.rows;
    row["cols"] = s.cols;
    row["tile_rows"] = g.tile_rows(s.rows);
    row["tile_cols"] = g.tile_cols(s.cols);
    return row;
  }

  const FormatsTensor& tensor(const Point& p) {
    std::string key = p.at("tensor");
    if (key == kOutliersTensor) key += "|" + p.at("outlier_scale") + "|" + p.at("seed");
    if (tensor_key_ == key) return *current_;
    cache_.clear();
    tensor_key_ = key;
    if (p.at("tensor") == kOutliersTensor) {
      synthetic_tensor_ = make_outliers_tensor(synthetic_spec(p));
      current_ = &synthetic_tensor_;
    } else {
      current_ = &find_real_formats_tensor(p.at("tensor"));
    }
    return *current_;
  }

  // The current tensor quantized under `config`, kept for the points that follow on it.
  const Quantization& quantization(const FormatsTensor& t, const QuantizeConfig& config, Backend& backend) {
    const std::string key = std::string(config.format.name()) + "|" + config.granularity.to_string() + "|" +
                            scale_rule_name(config.scale_rule) + "|" + rounding_mode_name(config.rounding.mode);
    if (const auto it = cache_.find(key); it != cache_.end()) return it->second;
    Quantization z;
    z.q = backend.quantize(t.fp32, t.rows, t.cols, config);
    z.values = cpu::dequantize(z.q);
    z.metrics = error_metrics(std::span<const float>(z.values), std::span<const double>(t.fp64),
                              default_rel_floor(std::span<const double>(t.fp64)));
    return cache_.emplace(key, std::move(z)).first->second;
  }

  SyntheticSpec synthetic_{256, 1024, "gaussian", 8, 1.0, 0};
  std::uint64_t stochastic_seed_ = 1;
  std::string tensor_key_;
  const FormatsTensor* current_ = nullptr;
  FormatsTensor synthetic_tensor_;
  std::map<std::string, Quantization> cache_;
};

}  // namespace

std::unique_ptr<StudyKind> make_formats_study() { return std::make_unique<FormatsStudy>(); }

}  // namespace fp8lab
