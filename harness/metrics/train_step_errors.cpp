#include "harness/metrics/train_step_errors.hpp"

#include <algorithm>
#include <stdexcept>

#include "harness/metrics/error_metrics.hpp"
#include "harness/study/real_layers.hpp"

namespace fp8lab {
namespace {

train::NamedGradient named(const std::string& name, const Eigen::MatrixXd& m) {
  train::NamedGradient g{name, m.rows(), m.cols(), std::vector<double>(static_cast<std::size_t>(m.size()))};
  for (Eigen::Index r = 0; r < m.rows(); ++r)
    for (Eigen::Index c = 0; c < m.cols(); ++c) g.values[static_cast<std::size_t>(r * m.cols() + c)] = m(r, c);
  return g;
}

int block_of(const std::string& name) { return name.starts_with("L") ? std::stoi(name.substr(1)) : -1; }

}  // namespace

std::string weight_kind(const std::string& name) {
  return block_of(name) < 0 ? name : name.substr(name.find('.') + 1);
}

ReferenceStep reference_step(const LlamaWeights& weights, const std::vector<int>& tokens) {
  const ref::LlamaBackward b = ref::llama_backward(to_reference_model(weights), tokens);
  const ref::LlamaModel& g = b.grad;
  ReferenceStep out{b.loss, {}};
  out.gradients.push_back(named("embedding", g.embedding));
  for (int l = 0; l < g.layers; ++l) {
    const std::string p = "L" + std::to_string(l) + ".";
    out.gradients.push_back(named(p + "rms_att", g.rms_att[l].transpose()));
    out.gradients.push_back(named(p + "wq", g.wq[l]));
    out.gradients.push_back(named(p + "wk", g.wk[l]));
    out.gradients.push_back(named(p + "wv", g.wv[l]));
    out.gradients.push_back(named(p + "wo", g.wo[l]));
    out.gradients.push_back(named(p + "rms_ffn", g.rms_ffn[l].transpose()));
    out.gradients.push_back(named(p + "w1", g.w1[l]));
    out.gradients.push_back(named(p + "w2", g.w2[l]));
    out.gradients.push_back(named(p + "w3", g.w3[l]));
  }
  out.gradients.push_back(named("rms_final", g.rms_final.transpose()));
  return out;
}

GradientErrors gradient_errors(const std::vector<train::NamedGradient>& step, const std::vector<train::NamedGradient>& reference) {
  if (step.size() != reference.size()) throw std::invalid_argument("gradient_errors: different numbers of tensors");
  GradientErrors e;
  std::vector<double> all_y, all_r;
  std::vector<std::vector<double>> block_y, block_r, kind_y, kind_r;
  for (std::size_t i = 0; i < step.size(); ++i) {
    if (step[i].name != reference[i].name || step[i].values.size() != reference[i].values.size())
      throw std::invalid_argument("gradient_errors: tensor " + step[i].name + " does not match " + reference[i].name);
    e.names.push_back(step[i].name);
    e.rel_frobenius.push_back(error_metrics(std::span<const double>(step[i].values), reference[i].values, 0.0).rel_frobenius);
    all_y.insert(all_y.end(), step[i].values.begin(), step[i].values.end());
    all_r.insert(all_r.end(), reference[i].values.begin(), reference[i].values.end());
    const std::string kind = weight_kind(step[i].name);
    auto k = std::find(e.kind_names.begin(), e.kind_names.end(), kind);
    if (k == e.kind_names.end()) {
      e.kind_names.push_back(kind);
      kind_y.emplace_back();
      kind_r.emplace_back();
      k = e.kind_names.end() - 1;
    }
    const auto ki = static_cast<std::size_t>(k - e.kind_names.begin());
    kind_y[ki].insert(kind_y[ki].end(), step[i].values.begin(), step[i].values.end());
    kind_r[ki].insert(kind_r[ki].end(), reference[i].values.begin(), reference[i].values.end());
    const int block = block_of(step[i].name);
    if (block < 0) continue;
    if (static_cast<int>(block_y.size()) <= block) {
      block_y.resize(static_cast<std::size_t>(block + 1));
      block_r.resize(static_cast<std::size_t>(block + 1));
    }
    auto& by = block_y[static_cast<std::size_t>(block)];
    auto& br = block_r[static_cast<std::size_t>(block)];
    by.insert(by.end(), step[i].values.begin(), step[i].values.end());
    br.insert(br.end(), reference[i].values.begin(), reference[i].values.end());
  }
  for (std::size_t l = 0; l < block_y.size(); ++l)
    e.block_rel_frobenius.push_back(error_metrics(std::span<const double>(block_y[l]), block_r[l], 0.0).rel_frobenius);
  for (std::size_t k = 0; k < kind_y.size(); ++k)
    e.kind_rel_frobenius.push_back(error_metrics(std::span<const double>(kind_y[k]), kind_r[k], 0.0).rel_frobenius);
  e.total_rel_frobenius = error_metrics(std::span<const double>(all_y), all_r, 0.0).rel_frobenius;
  return e;
}

std::vector<int> stories260k_greedy_tokens(const LlamaWeights& weights, int count) {
  return ref::llama_greedy(to_reference_model(weights), {1}, count - 1);
}

}  // namespace fp8lab
