#include "harness/study/real_layers.hpp"

#include <stdexcept>

#include "harness/train/llama2c_weights.hpp"

namespace fp8lab {
namespace {

Eigen::MatrixXd matrix(const std::vector<float>& data, std::size_t offset, int rows, int cols) {
  Eigen::MatrixXd m(rows, cols);
  for (int r = 0; r < rows; ++r)
    for (int c = 0; c < cols; ++c) m(r, c) = data[offset + static_cast<std::size_t>(r * cols + c)];
  return m;
}

}  // namespace

ref::LlamaModel to_reference_model(const LlamaWeights& w) {
  const LlamaConfig& c = w.config;
  ref::LlamaModel m;
  m.dim = c.dim;
  m.hidden = c.hidden_dim;
  m.layers = c.n_layers;
  m.heads = c.n_heads;
  m.kv_heads = c.n_kv_heads;
  m.vocab = c.vocab_size;
  m.embedding = matrix(w.token_embedding, 0, c.vocab_size, c.dim);
  m.rms_final = matrix(w.rms_final, 0, c.dim, 1);
  const auto D = static_cast<std::size_t>(c.dim), F = static_cast<std::size_t>(c.hidden_dim),
             KV = static_cast<std::size_t>(c.kv_dim());
  for (std::size_t l = 0; l < static_cast<std::size_t>(c.n_layers); ++l) {
    m.rms_att.push_back(matrix(w.rms_att, l * D, c.dim, 1));
    m.rms_ffn.push_back(matrix(w.rms_ffn, l * D, c.dim, 1));
    m.wq.push_back(matrix(w.wq, l * D * D, c.dim, c.dim));
    m.wk.push_back(matrix(w.wk, l * KV * D, c.kv_dim(), c.dim));
    m.wv.push_back(matrix(w.wv, l * KV * D, c.kv_dim(), c.dim));
    m.wo.push_back(matrix(w.wo, l * D * D, c.dim, c.dim));
    m.w1.push_back(matrix(w.w1, l * F * D, c.hidden_dim, c.dim));
    m.w2.push_back(matrix(w.w2, l * D * F, c.dim, c.hidden_dim));
    m.w3.push_back(matrix(w.w3, l * F * D, c.hidden_dim, c.dim));
  }
  return m;
}

const RealLayers& stories260k_layers() {
  static const RealLayers layers = [] {
    const LlamaWeights weights = load_llama2c_checkpoint(find_data_file("stories260K/stories260K.bin"), kStories260kSha256);
    const Tokenizer tokenizer =
        load_llama2c_tokenizer(find_data_file("stories260K/tok512.bin"), weights.config.vocab_size, kTok512Sha256);
    const ref::LlamaModel model = to_reference_model(weights);
    RealLayers r;
    r.checkpoint = weights.file.string();
    r.checkpoint_sha256 = weights.sha256;
    r.tokens = ref::llama_greedy(model, {1}, kRealLayerTokens - 1);
    r.prompt_text = tokenizer.decode(r.tokens);
    ref::LlamaBackward backward = ref::llama_backward(model, r.tokens);
    r.loss = backward.loss;
    r.linears = std::move(backward.linears);
    return r;
  }();
  return layers;
}

const ref::LinearCapture& find_real_layer(const std::string& name) {
  if (!name.starts_with(kRealLayerPrefix)) throw std::invalid_argument("layer '" + name + "' is not a real layer");
  const std::string short_name = name.substr(std::string(kRealLayerPrefix).size());
  for (const ref::LinearCapture& c : stories260k_layers().linears)
    if (c.name == short_name) return c;
  throw std::invalid_argument("layer '" + name + "' is not a linear layer of stories260K (L0..L4 .wq .wk .wv .wo .w1 "
                              ".w2 .w3, or classifier)");
}

std::vector<RealLayerShape> real_layer_shapes() {
  const RealLayers& r = stories260k_layers();
  std::vector<RealLayerShape> shapes;
  for (const ref::LinearCapture& c : r.linears)
    shapes.push_back({kRealLayerPrefix + c.name, c.weight.rows(), c.weight.cols(), c.input.rows(),
                      "real X, W, dY (checkpoint sha256 " + r.checkpoint_sha256.substr(0, 12) + "..., " +
                          std::to_string(r.tokens.size()) + " tokens)"});
  return shapes;
}

}  // namespace fp8lab
