#pragma once
// Weights (and, with the same layout, weight gradients) of the model, in ledger buffers.
// Sources: a llama2.c checkpoint (harness/train/llama2c_weights.hpp, FP32 values) or a seeded
// initialisation. Both give an FP32 LlamaWeights first, so the FP64 reference and every
// recipe start from the very same numbers.
#include <cstdint>
#include <vector>

#include "kernels/train/llama_weights.hpp"
#include "kernels/train/model_config.hpp"
#include "kernels/train/tensor.hpp"

namespace fp8lab::train {

// The seeded initialisation, llama2.c's train.py (GPT-2 style): every linear weight and the
// embedding ~ N(0, 0.02^2), except wo and w3 ~ N(0, (0.02 / sqrt(2 layers))^2) (residual
// projections scaled down with depth); RMSNorm gains 1. Normals from std::mt19937_64(seed)
// through Box-Muller written here (std::normal_distribution differs between libraries),
// rounded to FP32. Same seed, same weights on every machine.
LlamaWeights seeded_llama_weights(const ModelConfig& config, std::uint64_t seed);
ModelConfig config_of(const LlamaWeights& weights, const char* name = "stories260K");

template <class Real>
struct LayerWeights {
  Tensor<Real> rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3;
};

template <class Real>
struct ModelWeights {
  ModelConfig config;
  Tensor<Real> embedding;  // vocab x dim, also the classifier
  std::vector<LayerWeights<Real>> layers;
  Tensor<Real> rms_final;  // 1 x dim

  // Calls f(name, tensor) for every tensor: "embedding", "L<l>.rms_att", "L<l>.wq", ...,
  // "rms_final" (the order of the FP64 reference's LlamaModel fields).
  template <class F>
  void for_each(F&& f) const;
};

// Every tensor allocated (zeroed when the ledger allocates) in `category`.
template <class Real>
ModelWeights<Real> allocate_weights(const ModelConfig& config, MemoryLedger& ledger, MemoryCategory category,
                                    int element_bytes = sizeof(Real));
// Copies FP32 checkpoint values into allocated weights (ledger must allocate).
template <class Real>
void copy_weights(const LlamaWeights& from, ModelWeights<Real>& to);

template <class Real>
template <class F>
void ModelWeights<Real>::for_each(F&& f) const {
  f(std::string("embedding"), embedding);
  for (std::size_t l = 0; l < layers.size(); ++l) {
    const std::string p = "L" + std::to_string(l) + ".";
    const LayerWeights<Real>& w = layers[l];
    f(p + "rms_att", w.rms_att);
    f(p + "wq", w.wq);
    f(p + "wk", w.wk);
    f(p + "wv", w.wv);
    f(p + "wo", w.wo);
    f(p + "rms_ffn", w.rms_ffn);
    f(p + "w1", w.w1);
    f(p + "w2", w.w2);
    f(p + "w3", w.w3);
  }
  f(std::string("rms_final"), rms_final);
}

}  // namespace fp8lab::train
