#include "harness/study/formats_tensors.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "harness/study/real_layers.hpp"
#include "harness/study/study_kind.hpp"

namespace fp8lab {
namespace {

FormatsTensor from_matrix(std::string name, std::string role, const Eigen::MatrixXd& m, std::string source) {
  FormatsTensor t{std::move(name), std::move(role), m.rows(), m.cols(), {}, {}, 0.0f, std::move(source)};
  for (Eigen::Index r = 0; r < m.rows(); ++r)
    for (Eigen::Index c = 0; c < m.cols(); ++c) {
      t.fp64.push_back(m(r, c));
      t.fp32.push_back(static_cast<float>(m(r, c)));
      t.amax = std::max(t.amax, std::fabs(t.fp32.back()));
    }
  return t;
}

const std::vector<FormatsTensor>& real_tensors() {
  static const std::vector<FormatsTensor> tensors = [] {
    const RealLayers& r = stories260k_layers();
    const std::string checkpoint = "checkpoint=" + r.checkpoint + " (sha256 " + r.checkpoint_sha256 + ")";
    const std::string run = "its FP64 forward/backward on " + std::to_string(r.tokens.size()) + " real tokens";
    std::vector<FormatsTensor> out;
    for (const ref::LinearCapture& c : r.linears) {
      out.push_back(from_matrix(c.name + ".W", "weight", c.weight,
                                "stories260K real weight " + c.name + ".W (FP32 as stored), " + checkpoint));
      out.push_back(from_matrix(c.name + ".X", "activation", c.input,
                                "stories260K real activation " + c.name + ".X (" + run + ", rounded to FP32), " + checkpoint));
      out.push_back(from_matrix(c.name + ".dY", "gradient", c.output_grad,
                                "stories260K real activation gradient " + c.name + ".dY (" + run +
                                    ", rounded to FP32), " + checkpoint));
    }
    return out;
  }();
  return tensors;
}

}  // namespace

std::vector<std::string> real_formats_tensor_names() {
  std::vector<std::string> names;
  for (const FormatsTensor& t : real_tensors()) names.push_back(t.name);
  return names;
}

const FormatsTensor& find_real_formats_tensor(const std::string& name) {
  for (const FormatsTensor& t : real_tensors())
    if (t.name == name) return t;
  throw std::invalid_argument("tensor '" + name + "' is not '" + kOutliersTensor +
                              "' nor a stories260K tensor <linear>.W / .X / .dY (<linear>: L0..L4 .wq .wk .wv .wo .w1 "
                              ".w2 .w3, or classifier)");
}

FormatsTensor make_outliers_tensor(const SyntheticSpec& spec) {
  FormatsTensor t{kOutliersTensor, "activation", spec.rows, spec.cols, synthesize(spec), {}, 0.0f,
                  outliers_provenance(spec)};
  for (const float v : t.fp32) {
    if (!std::isfinite(v))
      throw PointFailure("synthetic tensor: outlier_scale " + std::to_string(spec.outlier_scale) +
                         " makes an element overflow FP32");
    t.fp64.push_back(v);
    t.amax = std::max(t.amax, std::fabs(v));
  }
  return t;
}

std::string outliers_provenance(const SyntheticSpec& spec) {
  char scale[32];
  std::snprintf(scale, sizeof scale, "%g", spec.outlier_scale);
  return "synthetic " + spec.distribution + " " + std::to_string(spec.rows) + "x" + std::to_string(spec.cols) +
         " (data/synthetic_tensors), outlier_channels=" + std::to_string(spec.outlier_channels) +
         ", outlier_scale=" + scale + ", seed=" + std::to_string(spec.seed);
}

}  // namespace fp8lab
