#include "harness/study/gemm_study_operands.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <utility>

#include "data/sha256.hpp"
#include "data/synthetic_tensors.hpp"
#include "harness/requests/operand_checks.hpp"
#include "harness/study/real_layers.hpp"

namespace fp8lab {
namespace {

std::vector<float> transpose(const std::vector<float>& x, std::int64_t rows, std::int64_t cols) {
  std::vector<float> t(x.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) t[static_cast<std::size_t>(c * rows + r)] = x[static_cast<std::size_t>(r * cols + c)];
  return t;
}

std::vector<float> to_floats(const Eigen::MatrixXd& m) {  // row-major FP32
  std::vector<float> v(static_cast<std::size_t>(m.size()));
  for (Eigen::Index r = 0; r < m.rows(); ++r)
    for (Eigen::Index c = 0; c < m.cols(); ++c) v[static_cast<std::size_t>(r * m.cols() + c)] = static_cast<float>(m(r, c));
  return v;
}

std::string axis_or(const Point& p, const std::string& axis, const std::string& fallback) {
  for (const auto& [name, value] : p.values)
    if (name == axis) return value;
  return fallback;
}

}  // namespace

const std::vector<float>& GemmOperands::transposed(const std::vector<float>& m, std::vector<float>& cache,
                                                   std::int64_t rows, std::int64_t cols) {
  if (cache.empty()) cache = transpose(m, rows, cols);
  return cache;
}

bool GemmStudyOperands::is_real(const std::string& layer) { return layer.starts_with(kRealLayerPrefix); }

bool GemmStudyOperands::is_synthetic(const std::string& layer) { return layer != kGemmTensorsLayer && !is_real(layer); }

void GemmStudyOperands::load_own_tensors(const StudySpec& spec) {
  const std::filesystem::path base = spec.file.parent_path();
  const auto load = [&](const char* field) -> std::pair<MatrixOperand, std::string> {
    const std::string path = spec.get_string(std::string("tensors.") + field, "");
    if (path.empty()) return {};
    const std::filesystem::path file = std::filesystem::path(path).is_absolute() ? std::filesystem::path(path) : base / path;
    MatrixOperand m = load_matrix_operand(file, spec.get_string(std::string("tensors.") + field + "_name", ""));
    return {std::move(m), std::string(field) + "=" + file.string() + " (sha256 " + sha256_file(file) + ")"};
  };
  auto [x, x_text] = load("x");
  auto [w, w_text] = load("w");
  auto [dy, dy_text] = load("dy");
  if (x.values.empty()) throw spec.error("tensors.x", "missing: the activation X (tokens x in)");
  if (w.values.empty()) throw spec.error("tensors.w", "missing: the weight W (out x in)");
  if (w.cols != x.cols)
    throw spec.error("tensors.w", "W is " + std::to_string(w.rows) + "x" + std::to_string(w.cols) + " but X is " +
                                      std::to_string(x.rows) + "x" + std::to_string(x.cols) + ": in features differ");
  if (!dy.values.empty() && (dy.rows != x.rows || dy.cols != w.rows))
    throw spec.error("tensors.dy", "dY is " + std::to_string(dy.rows) + "x" + std::to_string(dy.cols) + ", expected " +
                                       std::to_string(x.rows) + "x" + std::to_string(w.rows) + " (tokens x out)");
  own_ = OwnTensors{std::move(x.values), std::move(w.values), std::move(dy.values), {w.rows, w.cols, x.rows},
                    "bring-your-own: " + x_text + ", " + w_text + (dy_text.empty() ? "" : ", " + dy_text)};
}

GemmLayerDims GemmStudyOperands::dims(const std::string& layer) const {
  if (layer == kGemmTensorsLayer) return own_->dims;
  if (is_real(layer)) {
    const ref::LinearCapture& c = find_real_layer(layer);
    return {c.weight.rows(), c.weight.cols(), c.input.rows()};
  }
  const LayerShape l = find_layer(layer, catalog_);
  return {l.out_features, l.in_features, synthetic_.tokens};
}

std::string GemmStudyOperands::source_of(const Point& p) const {
  const std::string& layer = p.at("layer");
  if (layer == kGemmTensorsLayer) return own_->description;
  if (is_real(layer)) {
    const RealLayers& r = stories260k_layers();
    return "stories260K real tensors " + layer.substr(std::string(kRealLayerPrefix).size()) +
           ": W from checkpoint=" + r.checkpoint + " (sha256 " + r.checkpoint_sha256 +
           "), X and dY from its FP64 forward/backward on " + std::to_string(r.tokens.size()) + " tokens";
  }
  const std::string distribution = axis_or(p, "distribution", "gaussian");
  char scale[32];
  std::snprintf(scale, sizeof scale, "%g", synthetic_.outlier_scale);
  return "synthetic " + distribution + ": X tokens=" + std::to_string(synthetic_.tokens) + " x in, outlier_channels=" +
         std::to_string(synthetic_.outlier_channels) + ", outlier_scale=" + scale + "; W " +
         (synthetic_.weight_distribution == "same" ? distribution : synthetic_.weight_distribution) +
         " / sqrt(in); dY gaussian; seed=" + axis_or(p, "seed", "1");
}

GemmOperands& GemmStudyOperands::operands(const Point& p) {
  const std::string key = p.at("layer") + "|" + axis_or(p, "distribution", "gaussian") + "|" + axis_or(p, "seed", "1");
  if (cached_.key == key) return cached_;
  const GemmLayerDims d = dims(p.at("layer"));
  if (p.at("layer") == kGemmTensorsLayer) {
    cached_ = {key, own_->x, own_->w, own_->dy, d, {}, {}, {}};
    return cached_;
  }
  if (is_real(p.at("layer"))) {  // the captured values, rounded once to FP32
    const ref::LinearCapture& c = find_real_layer(p.at("layer"));
    cached_ = {key, to_floats(c.input), to_floats(c.weight), to_floats(c.output_grad), d, {}, {}, {}};
    return cached_;
  }
  const LayerShape l = find_layer(p.at("layer"), catalog_);
  const auto seed = std::stoull(axis_or(p, "seed", "1"));
  const std::string distribution = axis_or(p, "distribution", "gaussian");
  const std::string w_distribution = synthetic_.weight_distribution == "same" ? distribution : synthetic_.weight_distribution;
  std::vector<float> w = synthesize({l.out_features, l.in_features, w_distribution, 0, 1.0, seed * 3 + 1});
  const float w_scale = 1.0f / std::sqrt(static_cast<float>(l.in_features));
  for (float& v : w) v *= w_scale;
  cached_ = {key,
             synthesize({synthetic_.tokens, l.in_features, distribution, synthetic_.outlier_channels,
                         synthetic_.outlier_scale, seed * 3 + 0}),
             std::move(w),
             synthesize({synthetic_.tokens, l.out_features, "gaussian", 0, 1.0, seed * 3 + 2}),
             d, {}, {}, {}};
  return cached_;
}

}  // namespace fp8lab
