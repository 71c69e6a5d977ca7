// Dumps the FP64 Llama reference's loss and every weight gradient on stories260K, and the
// training-step engine's under its `fp64` recipe, for the peers test llama_autograd_test.py
// (torch autograd in float64 on the same weights and tokens).
//   llama_grads_driver OUT_DIR TOKEN...
// writes OUT_DIR/loss.npy (f64, [1]) and, for every weight W of the model (embedding,
// rms_final, and per layer l: rms_att.l, rms_ffn.l, wq.l, wk.l, wv.l, wo.l, w1.l, w2.l, w3.l),
// OUT_DIR/W.npy (the weight as the reference holds it, f64) and OUT_DIR/grad.W.npy; then
// OUT_DIR/engine.loss.npy and OUT_DIR/engine.grad.W.npy from run_training_step (recipe fp64,
// activation policy none), as the engine shapes them (the RMSNorm gains are 1 x dim rows).
// Bad usage or a token outside the vocabulary: one line on stderr, exit 2.
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "harness/train/llama2c_weights.hpp"
#include "data/tensor_io/npy.hpp"
#include "harness/study/real_layers.hpp"
#include "kernels/memory_ledger.hpp"
#include "kernels/train/model_weights.hpp"
#include "kernels/train/training_step.hpp"
#include "reference/llama_fp64_ref.hpp"

namespace {

fp8lab::Tensor f64_tensor(const Eigen::MatrixXd& m) {
  fp8lab::Tensor t;
  t.dtype = fp8lab::DType::f64;
  t.shape = {m.rows(), m.cols()};
  t.bytes.resize(static_cast<std::size_t>(m.size()) * sizeof(double));
  const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> row_major = m;  // npy is C order
  std::memcpy(t.bytes.data(), row_major.data(), t.bytes.size());
  return t;
}

void dump(const std::filesystem::path& dir, const std::string& name, const Eigen::MatrixXd& weight,
          const Eigen::MatrixXd& grad) {
  fp8lab::write_npy(dir / (name + ".npy"), f64_tensor(weight));
  fp8lab::write_npy(dir / ("grad." + name + ".npy"), f64_tensor(grad));
}

fp8lab::Tensor f64_tensor(const fp8lab::train::NamedGradient& g) {
  return f64_tensor(Eigen::Map<const Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
      g.values.data(), g.rows, g.cols));
}

// The engine names a layer's weight "L<l>.wq"; the reference's files above are "wq.<l>".
std::string reference_name(const std::string& engine_name) {
  if (engine_name.size() < 2 || engine_name[0] != 'L') return engine_name;
  const std::size_t dot = engine_name.find('.');
  return engine_name.substr(dot + 1) + "." + engine_name.substr(1, dot - 1);
}

void dump_engine_fp64(const std::filesystem::path& dir, const fp8lab::LlamaWeights& weights, const std::vector<int>& tokens) {
  namespace train = fp8lab::train;
  const train::ModelConfig config = train::config_of(weights);
  fp8lab::HostAllocator host;
  fp8lab::MemoryLedger ledger(&host);
  const train::StepResult r = train::run_training_step(
      train::StepInput{config, &weights, tokens}, train::named_recipe("fp64"),
      train::make_policy("none", config, static_cast<std::int64_t>(tokens.size()), sizeof(double)), ledger);
  fp8lab::write_npy(dir / "engine.loss.npy", f64_tensor(Eigen::MatrixXd::Constant(1, 1, r.report.loss)));
  for (const train::NamedGradient& g : r.gradients)
    fp8lab::write_npy(dir / ("engine.grad." + reference_name(g.name) + ".npy"), f64_tensor(g));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: llama_grads_driver OUT_DIR TOKEN TOKEN...\n");
    return 2;
  }
  try {
    const std::filesystem::path dir = argv[1];
    const fp8lab::LlamaWeights weights =
        fp8lab::load_llama2c_checkpoint(fp8lab::find_data_file("stories260K/stories260K.bin"), fp8lab::kStories260kSha256);
    const fp8lab::ref::LlamaModel model = fp8lab::to_reference_model(weights);
    std::vector<int> tokens;
    for (int i = 2; i < argc; ++i) {
      const int t = std::stoi(argv[i]);
      if (t < 0 || t >= model.vocab) throw std::invalid_argument(std::string("token ") + argv[i] + " is outside the vocabulary");
      tokens.push_back(t);
    }
    const fp8lab::ref::LlamaBackward b = fp8lab::ref::llama_backward(model, tokens);
    std::filesystem::create_directories(dir);
    fp8lab::write_npy(dir / "loss.npy", f64_tensor(Eigen::MatrixXd::Constant(1, 1, b.loss)));
    dump(dir, "embedding", model.embedding, b.grad.embedding);
    dump(dir, "rms_final", model.rms_final, b.grad.rms_final);
    for (int l = 0; l < model.layers; ++l) {
      const std::string s = "." + std::to_string(l);
      dump(dir, "rms_att" + s, model.rms_att[l], b.grad.rms_att[l]);
      dump(dir, "rms_ffn" + s, model.rms_ffn[l], b.grad.rms_ffn[l]);
      dump(dir, "wq" + s, model.wq[l], b.grad.wq[l]);
      dump(dir, "wk" + s, model.wk[l], b.grad.wk[l]);
      dump(dir, "wv" + s, model.wv[l], b.grad.wv[l]);
      dump(dir, "wo" + s, model.wo[l], b.grad.wo[l]);
      dump(dir, "w1" + s, model.w1[l], b.grad.w1[l]);
      dump(dir, "w2" + s, model.w2[l], b.grad.w2[l]);
      dump(dir, "w3" + s, model.w3[l], b.grad.w3[l]);
    }
    dump_engine_fp64(dir, weights, tokens);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "llama_grads_driver: %s\n", e.what());
    return 2;
  }
  return 0;
}
