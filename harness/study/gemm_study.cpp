// Study kind "gemm": the FP8 GEMMs of a linear layer (Fprop Y = X W^T, Dgrad dX = dY W,
// Wgrad dW = dY^T X) on synthetic operands of the layer's real shape, through the selected
// backend (--backend; auto on a Hopper GPU runs on the CPU emulation what the GPU cannot, and
// each point records which backend ran it), with the three errors of DESIGN.md section 2 as metrics.
//
// Operands (documented in the results file): X is tokens x in_features from `distribution`
// with `operands.outlier_channels` columns scaled by `operands.outlier_scale`; W is
// out_features x in_features from `operands.weight_distribution` (default gaussian; "same":
// X's distribution, e.g. both positive) / sqrt(in_features); dY is tokens x out_features
// Gaussian. Layers named stories260K/... take X, W and dY from the real checkpoint instead
// (harness/study/real_layers.hpp); layer "tensors" takes them from the files of the spec's
// [tensors] table (x, w and optionally dy; .npy, or .safetensors with x_name / w_name /
// dy_name; paths relative to the spec). harness/study/gemm_study_operands.hpp makes them; this
// file is the kind: axes, settings, grid checks, the per-point GEMM and its columns.
// In C = A * B^T form (both K-major):
//   fprop  A = X   (T x K)   B = W   (N x K)
//   dgrad  A = dY  (T x N)   B = W^T (K x N)
//   wgrad  A = dY^T (N x T)  B = X^T (K x T)
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>
#include <map>
#include <random>

#include "data/synthetic_tensors.hpp"
#include "harness/metrics/gemm_errors.hpp"
#include "harness/requests/memory_budget.hpp"
#include "harness/requests/operand_checks.hpp"
#include "harness/study/gemm_study_operands.hpp"
#include "harness/study/real_layers.hpp"
#include "harness/study/study_kind.hpp"
#include "kernels/backend.hpp"

namespace fp8lab {
namespace {

constexpr const char* kErrors[] = {"quantization", "accumulation", "total"};

struct GemmShape {
  std::int64_t m, n, k;
};

class GemmStudy final : public StudyKind {
 public:
  std::string name() const override { return "gemm"; }

  // `distribution` and `seed` shape synthetic operands only: a study whose layers include
  // real or own tensors has no such axes (configure refuses them when listed), so no
  // coordinate of the file claims a distribution the operands do not have.
  std::vector<AxisDef> axes() const override {
    std::vector<AxisDef> a = {{"layer", {"shape:1024x1024"}, "linear layer (catalog name, stories260K/..., shape:NxK or tensors)"},
                              {"gemm", {"fprop"}, "GEMM of the layer: fprop, dgrad or wgrad"},
                              {"format", {"e4m3"}, "FP8 operand format"},
                              {"a_granularity", {"tile:1x128"}, "scale granularity of A", AxisStorage::granularity},
                              {"b_granularity", {"block:128x128"}, "scale granularity of B", AxisStorage::granularity},
                              {"scale", {"fp32"}, "scale rule"},
                              {"accum", {"hopper"}, "tensor-core accumulation model"},
                              {"promotion", {"128"}, "FP32 promotion interval N_C (elements of K; 0: never)", AxisStorage::promotion}};
    if (only_synthetic_layers_) {
      a.push_back({"distribution", {"gaussian"}, "distribution of the synthetic activation X"});
      a.push_back({"seed", {"1"}, "seed of the synthetic operands", AxisStorage::integer});
    }
    return a;
  }

  void validate_value(const std::string& axis, const std::string& v) const override {
    if (axis == "layer") {
      if (v == kGemmTensorsLayer) {
        if (!operands_.has_own_tensors()) throw std::invalid_argument("layer 'tensors' needs a [tensors] table naming x and w");
      } else if (GemmStudyOperands::is_real(v)) {
        find_real_layer(v);
      } else {
        operands_.catalog_layer(v);
      }
    }
    else if (axis == "gemm") {
      if (v != "fprop" && v != "dgrad" && v != "wgrad") throw std::invalid_argument("gemm '" + v + "' is not one of fprop, dgrad, wgrad");
    } else if (axis == "format") parse_fp8_format(v);
    else if (axis == "a_granularity" || axis == "b_granularity") Granularity::parse(v);
    else if (axis == "scale") parse_gemm_scale_rule(v);
    else if (axis == "accum") AccumulationModel::parse(v);
    else if (axis == "promotion") PromotionInterval::parse(v);
    else if (axis == "distribution") validate({1, 1, v, 0, 1.0, 0});
    else if (axis == "seed") {
      if (v.empty() || v.find_first_not_of("0123456789") != std::string::npos)
        throw std::invalid_argument("seed '" + v + "' is not a non-negative integer");
    }
  }

  void configure(const StudySpec& spec) override {
    refuse_synthetic_settings_on_real_layers(spec);
    GemmSyntheticSettings synthetic;
    synthetic.tokens = spec.get_int("operands.tokens", 256);
    synthetic.outlier_channels = spec.get_int("operands.outlier_channels", 0);
    synthetic.outlier_scale = spec.get_double("operands.outlier_scale", 100.0);
    synthetic.weight_distribution = spec.get_string("operands.weight_distribution", "gaussian");
    if (synthetic.weight_distribution != "same") {
      try {
        validate({1, 1, synthetic.weight_distribution, 0, 1.0, 0});
      } catch (const std::invalid_argument& e) {
        throw spec.error("operands.weight_distribution", std::string(e.what()) + " (or \"same\")");
      }
    }
    sample_rows_ = spec.get_int("sampling.rows", 0);
    sample_cols_ = spec.get_int("sampling.cols", 0);
    sample_seed_ = spec.get_int("sampling.seed", 0);
    if (synthetic.tokens <= 0) throw spec.error("operands.tokens", "must be positive");
    if (synthetic.outlier_channels < 0) throw spec.error("operands.outlier_channels", "must be >= 0");
    if (!(synthetic.outlier_scale > 0) || !(synthetic.outlier_scale <= std::numeric_limits<float>::max()))
      throw spec.error("operands.outlier_scale", "must be a positive number within the FP32 range (at most 3.4e38)",
                       &spec.table.at_path("operands.outlier_scale").node()->source());
    if (sample_rows_ < 0 || sample_cols_ < 0) throw spec.error("sampling", "rows and cols must be >= 0");
    operands_.set_synthetic(synthetic);
    if (spec.table["tensors"]) operands_.load_own_tensors(spec);
  }

  void check_grid(const StudySpec& spec, const std::vector<Point>& points) const override {
    for (const Point& p : points) {
      const GemmShape s = shape(p);
      if (p.at("layer") == kGemmTensorsLayer && p.at("gemm") != "fprop" && !operands_.own_tensors_have_dy())
        throw spec.error("tensors.dy", "missing: " + p.at("gemm") + " needs the output gradient dy (tokens x out)");
      const bool synthetic = GemmStudyOperands::is_synthetic(p.at("layer"));
      if (synthetic && operands_.synthetic().outlier_channels > operands_.catalog_layer(p.at("layer")).in_features)
        throw spec.error("operands.outlier_channels", "exceeds in_features of layer " + p.at("layer"));
      for (const char* axis : {"a_granularity", "b_granularity"}) {
        const Granularity g = Granularity::parse(p.at(axis));
        if (g.kind != Granularity::Kind::tensor && g.kind != Granularity::Kind::row && g.size > s.k)
          throw spec.error(std::string("axes.") + axis, p.at(axis) + " is larger than K = " + std::to_string(s.k) +
                                                            " of layer " + p.at("layer") + " (" + p.at("gemm") +
                                                            "): the layer is too small for the tile");
      }
    }
  }

  std::optional<std::string> skip_reason(const Point& p, const Backend& backend) const override {
    const GemmShape s = shape(p);
    const Fp8Format f = parse_fp8_format(p.at("format"));
    // Shapes only: the codes are zeros, which is all plan_gemm and the backend look at.
    const QuantizedTensor a = make_quantized_tensor(s.m, s.k, {f, Granularity::parse(p.at("a_granularity")), ScaleRule::fp32});
    const QuantizedTensor b = make_quantized_tensor(s.n, s.k, {f, Granularity::parse(p.at("b_granularity")), ScaleRule::fp32});
    const GemmConfig gemm_config = config(p);
    try {
      plan_gemm(a, b, gemm_config);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    if (std::string why = backend.gemm_config_failure(a, b, gemm_config); !why.empty()) return why;
    return std::nullopt;
  }

  std::vector<ColumnDef> result_columns() const override {
    using T = ColumnDef::Type;
    std::vector<ColumnDef> c = {
        {"m", T::i64, "1", "GEMM rows M"},
        {"n", T::i64, "1", "GEMM columns N"},
        {"k", T::i64, "1", "GEMM reduction length K"},
        {"promotion_elements", T::i64, "1", "promotion interval in elements of K (K when never)"},
        {"a_tile_k", T::i64, "1", "extent of one A scale along K"},
        {"b_tile_k", T::i64, "1", "extent of one B scale along K"},
        {"rows_computed", T::i64, "1", "output rows computed (sampled when < m)"},
        {"cols_computed", T::i64, "1", "output columns computed (sampled when < n)"},
        {"seconds", T::f64, "s", "wall time of the GEMM"},
        {"reference_rms", T::f64, "1", "RMS of the FP64 reference of the original operands over the computed outputs"},
        {"gemm_backend", T::str, "", "backend that ran the GEMM (--backend auto: the CPU for what the GPU cannot run)"},
        {"gemm_fallback_reason", T::str, "", "why the selected backend handed this GEMM on (empty when it ran it)"}};
    for (const char* e : kErrors) {
      const std::string p = e;
      c.push_back({p + "_rel_frobenius", T::f64, "1", p + " error, relative Frobenius norm"});
      c.push_back({p + "_rel_frobenius_ci_low", T::f64, "1", p + " error, 95% interval low (sampled; NaN when exact)"});
      c.push_back({p + "_rel_frobenius_ci_high", T::f64, "1", p + " error, 95% interval high (sampled; NaN when exact)"});
      c.push_back({p + "_sqnr_db", T::f64, "dB", p + " SQNR"});
      c.push_back({p + "_deepgemm_diff", T::f64, "1", p + " error, DeepGEMM diff"});
      c.push_back({p + "_max_abs", T::f64, "same as C", p + " error, max absolute (in the units of the output C)"});
      c.push_back({p + "_max_rel", T::f64, "1", p + " error, max relative over |ref| > 1% of reference_rms"});
      c.push_back({p + "_one_minus_cosine", T::f64, "1", p + " error, 1 - cosine similarity"});
    }
    return c;
  }

  Row skipped_row(const Point& p) const override {
    Row row = shape_row(p);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (const ColumnDef& c : result_columns())
      if (!row.contains(c.name)) row[c.name] = c.type == ColumnDef::Type::f64 ? Value(nan) : c.type == ColumnDef::Type::i64 ? Value(std::int64_t{0}) : Value(std::string());
    return row;
  }

  Row evaluate(const Point& p, const RunContext& context) override {
    const GemmShape s = shape(p);
    GemmOperands& ops = operands_.operands(p);
    const std::string& gemm = p.at("gemm");
    const std::vector<float>& a = gemm == "fprop" ? ops.x : gemm == "dgrad" ? ops.dy : ops.transposed(ops.dy, ops.dy_t, ops.dims.tokens, ops.dims.out);
    const std::vector<float>& b = gemm == "fprop" ? ops.w
                                  : gemm == "dgrad" ? ops.transposed(ops.w, ops.w_t, ops.dims.out, ops.dims.in)
                                                    : ops.transposed(ops.x, ops.x_t, ops.dims.tokens, ops.dims.in);
    // What reaches the kernels must be finite in FP32, the precision they see.
    require_finite_operand(a, s.k, "A");
    require_finite_operand(b, s.k, "B");
    const Fp8Format f = parse_fp8_format(p.at("format"));
    const ScaleRule rule = parse_gemm_scale_rule(p.at("scale"));
    Backend& backend = *context.backend;
    const QuantizedTensor qa = backend.quantize(a, s.m, s.k, {f, Granularity::parse(p.at("a_granularity")), rule});
    const QuantizedTensor qb = backend.quantize(b, s.n, s.k, {f, Granularity::parse(p.at("b_granularity")), rule});
    std::mt19937_64 rng(static_cast<std::uint64_t>(sample_seed_));
    const std::vector<std::int64_t> rows = sample_without_replacement(sample_rows_, s.m, rng);
    const std::vector<std::int64_t> cols = sample_without_replacement(sample_cols_, s.n, rng);
    const GemmConfig gemm_config = config(p);
    const Backend::GemmRoute route = backend.gemm_route(qa, qb, gemm_config);
    const auto start = std::chrono::steady_clock::now();
    const std::vector<float> out = backend.gemm_nt(qa, qb, gemm_config, {context.threads, false, rows, cols});
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const GemmErrors errors = gemm_errors(a, b, qa, qb, out, rows, cols);
    if (const std::optional<std::string> why = non_finite_reason(errors, out)) throw PointFailure(*why);

    Row row = shape_row(p);
    row["rows_computed"] = errors.rows_computed;
    row["cols_computed"] = errors.cols_computed;
    row["seconds"] = seconds;
    row["reference_rms"] = errors.reference_rms;
    row["gemm_backend"] = route.backend;
    row["gemm_fallback_reason"] = route.fallback_reason;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (const auto& [name, e] : {std::pair<std::string, const ErrorWithInterval*>{"quantization", &errors.quantization},
                                  {"accumulation", &errors.accumulation},
                                  {"total", &errors.total}}) {
      row[name + "_rel_frobenius"] = e->metrics.rel_frobenius;
      row[name + "_rel_frobenius_ci_low"] = e->sampled ? e->rel_frobenius.low : nan;
      row[name + "_rel_frobenius_ci_high"] = e->sampled ? e->rel_frobenius.high : nan;
      row[name + "_sqnr_db"] = e->metrics.sqnr_db;
      row[name + "_deepgemm_diff"] = e->metrics.deepgemm_diff;
      row[name + "_max_abs"] = e->metrics.max_abs;
      row[name + "_max_rel"] = e->metrics.max_rel;
      row[name + "_one_minus_cosine"] = e->metrics.one_minus_cosine;
    }
    return row;
  }

  MemoryEstimate memory_estimate(const Point& p) const override {
    const GemmShape s = shape(p);
    const GemmLayerDims d = operands_.dims(p.at("layer"));
    const auto u = [](std::int64_t x) { return static_cast<std::uint64_t>(x); };
    // X, W, dY in FP32 and their transposes, then the GEMM of this point.
    const std::uint64_t operands = saturating_mul(
        8, saturating_add(saturating_add(saturating_mul(u(d.tokens), u(d.in)), saturating_mul(u(d.out), u(d.in))),
                          saturating_mul(u(d.tokens), u(d.out))));
    const std::int64_t rows = sample_rows_ > 0 ? std::min(sample_rows_, s.m) : s.m;
    const std::int64_t cols = sample_cols_ > 0 ? std::min(sample_cols_, s.n) : s.n;
    const bool synthetic = GemmStudyOperands::is_synthetic(p.at("layer"));
    return {saturating_add(operands, gemm_peak_bytes(s.m, s.n, s.k, rows, cols)),
            synthetic && d.tokens >= std::max(d.out, d.in) ? "operands.tokens" : "axes.layer"};
  }

  std::string operand_provenance(const Point& p) const override { return operands_.source_of(p); }

  // The GEMM's multiply-adds (on the outputs computed) plus quantizing both operands.
  double point_cost(const Point& p) const override {
    const GemmShape s = shape(p);
    const double rows = static_cast<double>(sample_rows_ > 0 ? std::min(sample_rows_, s.m) : s.m);
    const double cols = static_cast<double>(sample_cols_ > 0 ? std::min(sample_cols_, s.n) : s.n);
    const double k = static_cast<double>(s.k);
    return 2.0 * rows * cols * k + static_cast<double>(s.m + s.n) * k;
  }

  std::string operand_description() const override {
    if (!only_synthetic_layers_)
      return any_synthetic_layer_ ? "per point in the `operands` variable: real or own tensors, and generated ones for "
                                    "catalog and shape:NxK layers"
                                  : "real or own tensors, per point in the `operands` variable";
    const GemmSyntheticSettings& s = operands_.synthetic();
    return "synthetic: X tokens(" + std::to_string(s.tokens) + ") x in_features from the point's distribution with " +
           std::to_string(s.outlier_channels) + " outlier channels x" + std::to_string(s.outlier_scale) +
           "; W out x in " + (s.weight_distribution == "same" ? std::string("from X's distribution") : s.weight_distribution) +
           " / sqrt(in); dY tokens x out Gaussian (data/synthetic_tensors.hpp)";
  }

 private:
  GemmShape shape(const Point& p) const {
    const GemmLayerDims d = operands_.dims(p.at("layer"));
    const std::string& g = p.at("gemm");
    if (g == "fprop") return {d.tokens, d.out, d.in};
    if (g == "dgrad") return {d.tokens, d.in, d.out};
    return {d.out, d.in, d.tokens};
  }

  // A study with a real or own-tensor layer: the synthetic axes do not apply to it (refused
  // rather than recorded: the grid would hold copies of one computation labelled with values
  // that did not shape it); and when no layer is synthetic, neither do the [operands] settings.
  void refuse_synthetic_settings_on_real_layers(const StudySpec& spec) {
    std::string non_synthetic;
    bool any_synthetic = false;
    bool listed = false;
    for (const Axis& axis : spec.axes)
      if (axis.name == "layer") {
        listed = true;
        for (const std::string& v : axis.values) {
          if (GemmStudyOperands::is_synthetic(v)) any_synthetic = true;
          else if (non_synthetic.empty()) non_synthetic = v;
        }
      }
    if (!listed) any_synthetic = true;  // the default layer is a synthetic shape
    only_synthetic_layers_ = non_synthetic.empty();
    any_synthetic_layer_ = any_synthetic;
    if (only_synthetic_layers_) return;
    const std::string why = non_synthetic == kGemmTensorsLayer ? "its operands are the files of [tensors]"
                                                               : "its operands are the checkpoint's real tensors";
    for (const Axis& axis : spec.axes)
      if (axis.name == "distribution" || axis.name == "seed")
        throw spec.error("axes." + axis.name, "does not apply to layer " + non_synthetic + " (" + why +
                                                  "); remove the axis, or put synthetic and real layers in separate studies",
                         &axis.positions.front());
    if (any_synthetic) return;
    for (const char* key : {"tokens", "outlier_channels", "outlier_scale", "weight_distribution"})
      if (const toml::node* node = spec.table.at_path(std::string("operands.") + key).node())
        throw spec.error(std::string("operands.") + key, "does not apply: no layer of the study is synthetic (layer " +
                                                             non_synthetic + ": " + why + ")",
                         &node->source());
  }

  GemmConfig config(const Point& p) const {
    GemmConfig c{AccumulationModel::parse(p.at("accum")), PromotionInterval::parse(p.at("promotion")), OutputType::fp32};
    // Test-only: FP8LAB_TEST_BREAK_ROUNDING=1 accumulates with 3 fewer fraction bits, so the
    // regression test can show that `fp8lab compare` catches a broken accumulation rounding.
    const char* broken = std::getenv("FP8LAB_TEST_BREAK_ROUNDING");
    if (broken && std::string(broken) == "1" && c.accumulation.kind == AccumulationModel::Kind::fused)
      c.accumulation.fraction_bits -= 3;
    return c;
  }

  Row shape_row(const Point& p) const {
    const GemmShape s = shape(p);
    const QuantizedTensor ga = make_quantized_tensor(0, s.k, {Fp8Format::e4m3, Granularity::parse(p.at("a_granularity")), ScaleRule::fp32});
    const QuantizedTensor gb = make_quantized_tensor(0, s.k, {Fp8Format::e4m3, Granularity::parse(p.at("b_granularity")), ScaleRule::fp32});
    const PromotionInterval promotion = PromotionInterval::parse(p.at("promotion"));
    return {{"m", s.m}, {"n", s.n}, {"k", s.k},
            {"promotion_elements", promotion.never ? s.k : promotion.elements},
            {"a_tile_k", ga.tile_cols}, {"b_tile_k", gb.tile_cols},
            {"rows_computed", std::int64_t{0}}, {"cols_computed", std::int64_t{0}}};
  }

  GemmStudyOperands operands_;
  std::int64_t sample_rows_ = 0, sample_cols_ = 0, sample_seed_ = 0;
  bool only_synthetic_layers_ = true, any_synthetic_layer_ = true;  // decided by configure from the layer axis
};

}  // namespace

std::unique_ptr<StudyKind> make_gemm_study() { return std::make_unique<GemmStudy>(); }

}  // namespace fp8lab
