#include "harness/study/real_gradients.hpp"

#include <stdexcept>

#include "harness/metrics/train_step_errors.hpp"
#include "harness/study/real_layers.hpp"
#include "harness/train/llama2c_weights.hpp"
#include "kernels/memory_ledger.hpp"
#include "kernels/train/model_weights.hpp"
#include "kernels/train/training_step.hpp"

namespace fp8lab {
namespace {

bool is_linear_weight(const std::string& name) {
  for (const char* kind : train::kLinearKinds)
    if (name.ends_with(std::string(".") + kind)) return true;
  return name == "embedding";
}

RealGradients compute(train::AttentionKind attention) {
  const RealLayers& layers = stories260k_layers();  // the token batch and every linear's dY
  const LlamaWeights weights = load_llama2c_checkpoint(find_data_file("stories260K/stories260K.bin"), kStories260kSha256);
  const train::ModelConfig model = train::config_of(weights);
  HostAllocator host;
  MemoryLedger ledger(&host);
  train::StepInput input{model, &weights, layers.tokens};
  input.attention = attention;
  const train::StepResult step = train::run_training_step(
      input, train::named_recipe("fp32"),
      train::make_policy("none", model, static_cast<std::int64_t>(layers.tokens.size()), 4, attention), ledger);
  const std::string engine = attention == train::AttentionKind::naive ? "engine, fp32 recipe" : "engine, fp32 recipe, flash attention";
  const ReferenceStep reference = reference_step(weights, layers.tokens);
  RealGradients out{weights.file.string(), weights.sha256, {}};
  const std::string checkpoint = "checkpoint=" + out.checkpoint + " (sha256 " + out.checkpoint_sha256 + "), " +
                                 std::to_string(layers.tokens.size()) + " real tokens";
  for (std::size_t i = 0; i < step.gradients.size(); ++i) {
    const train::NamedGradient& g = step.gradients[i];
    if (!is_linear_weight(g.name)) continue;
    if (reference.gradients[i].name != g.name) throw std::logic_error("real gradients: engine and reference disagree on " + g.name);
    RealGradient t{g.name + ".dW", "weight", g.rows, g.cols, {}, reference.gradients[i].values,
                   "stories260K real weight gradient " + g.name + ".dW (" + engine + "; FP64 reference beside it), " +
                       checkpoint};
    t.fp32.assign(g.values.begin(), g.values.end());  // the fp32 recipe's values, held exactly in double
    out.tensors.push_back(std::move(t));
  }
  for (const ref::LinearCapture& c : layers.linears) {
    RealGradient t{c.name + ".dY", "activation", c.output_grad.rows(), c.output_grad.cols(), {}, {},
                   "stories260K real activation gradient " + c.name + ".dY (FP64 reference backward, rounded to FP32), " +
                       checkpoint};
    for (Eigen::Index r = 0; r < c.output_grad.rows(); ++r)
      for (Eigen::Index k = 0; k < c.output_grad.cols(); ++k) {
        t.fp64.push_back(c.output_grad(r, k));
        t.fp32.push_back(static_cast<float>(c.output_grad(r, k)));
      }
    out.tensors.push_back(std::move(t));
  }
  return out;
}

}  // namespace

const RealGradients& stories260k_gradients(train::AttentionKind attention) {
  if (attention == train::AttentionKind::flash) {
    static const RealGradients flash = compute(attention);
    return flash;
  }
  static const RealGradients naive = compute(attention);
  return naive;
}

const RealGradient& find_real_gradient(const std::string& name, train::AttentionKind attention) {
  for (const RealGradient& g : stories260k_gradients(attention).tensors)
    if (g.name == name) return g;
  throw std::invalid_argument("tensor '" + name + "' is not a real gradient of stories260K (L0..L4 .wq .wk .wv .wo .w1 .w2 "
                              ".w3 with .dW or .dY, embedding.dW, classifier.dY) nor 'lognormal'");
}

std::vector<std::string> real_gradient_names() {
  std::vector<std::string> names;
  for (const RealGradient& g : stories260k_gradients().tensors) names.push_back(g.name);
  return names;
}

}  // namespace fp8lab
