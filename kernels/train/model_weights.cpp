#include "kernels/train/model_weights.hpp"

#include <cmath>
#include <cstring>
#include <numbers>
#include <random>

namespace fp8lab::train {
namespace {

// Box-Muller from two uniforms in (0, 1] built from the generator's top 53 bits.
struct Normal {
  std::mt19937_64 rng;
  double spare = 0;
  bool has_spare = false;
  double uniform() { return (static_cast<double>(rng() >> 11) + 1.0) * 0x1p-53; }
  double operator()() {
    if (has_spare) {
      has_spare = false;
      return spare;
    }
    const double r = std::sqrt(-2.0 * std::log(uniform())), angle = 2.0 * std::numbers::pi * uniform();
    spare = r * std::sin(angle);
    has_spare = true;
    return r * std::cos(angle);
  }
};

void fill_normal(std::vector<float>& v, std::size_t n, double stddev, Normal& normal) {
  v.resize(n);
  for (float& x : v) x = static_cast<float>(stddev * normal());
}

}  // namespace

LlamaWeights seeded_llama_weights(const ModelConfig& c, std::uint64_t seed) {
  c.validate();
  LlamaWeights w;
  w.config = {c.dim, c.hidden, c.layers, c.heads, c.kv_heads, c.vocab, 0};
  Normal normal{std::mt19937_64(seed)};
  const auto L = static_cast<std::size_t>(c.layers), D = static_cast<std::size_t>(c.dim),
             F = static_cast<std::size_t>(c.hidden), KV = static_cast<std::size_t>(c.kv_dim());
  const double std_base = 0.02, std_residual = 0.02 / std::sqrt(2.0 * c.layers);
  fill_normal(w.token_embedding, static_cast<std::size_t>(c.vocab) * D, std_base, normal);
  w.rms_att.assign(L * D, 1.0f);
  w.rms_ffn.assign(L * D, 1.0f);
  w.rms_final.assign(D, 1.0f);
  fill_normal(w.wq, L * D * D, std_base, normal);
  fill_normal(w.wk, L * KV * D, std_base, normal);
  fill_normal(w.wv, L * KV * D, std_base, normal);
  fill_normal(w.wo, L * D * D, std_residual, normal);
  fill_normal(w.w1, L * F * D, std_base, normal);
  fill_normal(w.w2, L * D * F, std_base, normal);
  fill_normal(w.w3, L * F * D, std_residual, normal);
  return w;
}

ModelConfig config_of(const LlamaWeights& w, const char* name) {
  const LlamaConfig& c = w.config;
  return {name, c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size};
}

template <class Real>
ModelWeights<Real> allocate_weights(const ModelConfig& c, MemoryLedger& ledger, MemoryCategory category,
                                    int element_bytes) {
  auto make = [&](std::int64_t rows, std::int64_t cols) {
    Tensor<Real> t = make_tensor<Real>(ledger, rows, cols, category, element_bytes);
    if (t.has_data()) std::memset(t.data(), 0, static_cast<std::size_t>(t.size()) * sizeof(Real));
    return t;
  };
  ModelWeights<Real> w;
  w.config = c;
  w.embedding = make(c.vocab, c.dim);
  for (int l = 0; l < c.layers; ++l) {
    LayerWeights<Real> lw;
    lw.rms_att = make(1, c.dim);
    lw.wq = make(c.dim, c.dim);
    lw.wk = make(c.kv_dim(), c.dim);
    lw.wv = make(c.kv_dim(), c.dim);
    lw.wo = make(c.dim, c.dim);
    lw.rms_ffn = make(1, c.dim);
    lw.w1 = make(c.hidden, c.dim);
    lw.w2 = make(c.dim, c.hidden);
    lw.w3 = make(c.hidden, c.dim);
    w.layers.push_back(std::move(lw));
  }
  w.rms_final = make(1, c.dim);
  return w;
}

template <class Real>
void copy_weights(const LlamaWeights& from, ModelWeights<Real>& to) {
  const auto copy = [](const std::vector<float>& src, std::size_t offset, const Tensor<Real>& dst) {
    for (std::int64_t i = 0; i < dst.size(); ++i) dst.data()[i] = static_cast<Real>(src[offset + static_cast<std::size_t>(i)]);
  };
  copy(from.token_embedding, 0, to.embedding);
  copy(from.rms_final, 0, to.rms_final);
  std::size_t off[9] = {};  // running offsets: rms_att wq wk wv wo rms_ffn w1 w2 w3
  for (LayerWeights<Real>& lw : to.layers) {
    const std::vector<float>* src[9] = {&from.rms_att, &from.wq, &from.wk, &from.wv, &from.wo,
                                        &from.rms_ffn, &from.w1, &from.w2, &from.w3};
    const Tensor<Real>* dst[9] = {&lw.rms_att, &lw.wq, &lw.wk, &lw.wv, &lw.wo, &lw.rms_ffn, &lw.w1, &lw.w2, &lw.w3};
    for (int i = 0; i < 9; ++i) {
      copy(*src[i], off[i], *dst[i]);
      off[i] += static_cast<std::size_t>(dst[i]->size());
    }
  }
}

template ModelWeights<float> allocate_weights(const ModelConfig&, MemoryLedger&, MemoryCategory, int);
template ModelWeights<double> allocate_weights(const ModelConfig&, MemoryLedger&, MemoryCategory, int);
template void copy_weights(const LlamaWeights&, ModelWeights<float>&);
template void copy_weights(const LlamaWeights&, ModelWeights<double>&);

}  // namespace fp8lab::train
