#pragma once
// ZeRO sharding of the model states (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations
// Toward Training Trillion Parameter Models", sec. 3.1 and 5): the bytes one of N data-parallel
// ranks holds for the weights, the gradients and the optimizer states of a model, at stage
//   0  nothing sharded          W + G + O          paper: (2 + 2 + K) Psi
//   1  optimizer states (Pos)   W + G + O / N      paper: 2 Psi + 2 Psi + K Psi / N
//   2  + gradients (Pos+g)      W + (G + O) / N    paper: 2 Psi + (2 + K) Psi / N
//   3  + weights (Pos+g+p)      (W + G + O) / N    paper: (2 + 2 + K) Psi / N
// with W, G, O the whole model's bytes of each state (paper: mixed-precision Adam, W = 2 Psi,
// G = 2 Psi, O = K Psi with K = 12). Only the model states are counted, as in the paper: the
// gather buffers of stage 3, the gradient buckets of stages 2 and 3 and ZeRO-R's partitioned
// activations are not.
//
// Exact integer bytes. A sharded state is one flat buffer cut into N equal parts, the last
// padded (as DeepSpeed pads its flat partitions): a rank holds ceil(bytes / N), which is the
// paper's figure whenever N divides it (7.5e9 parameters on 64 ranks: 120e9, 31.40625e9,
// 16.640625e9, 1.875e9 bytes, the paper's 120 GB, 31.4 GB, 16.6 GB, 1.9 GB).
//
// The bytes of a state come from the model's tensor shapes where they are known, so that
// scale factors (one FP32 per 128x128 block of an FP8 weight, one per 1x128 group of an FP8
// moment) are counted per tensor with partial blocks rounded up, not as a fraction per
// parameter; from a bare parameter count only where no shapes exist (see model_state_bytes).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/train/model_config.hpp"

namespace fp8lab::train {

// One trained tensor, rows x cols as the model stores it: a linear weight out x in (PyTorch's
// nn.Linear layout, so a 1x128 group runs along the input dimension), a norm gain 1 x dim, the
// embedding (and a separate classifier) vocab x dim. `linear`: a linear layer's weight, the
// GEMM operand an FP8 recipe quantizes; the embedding, classifier and norm gains are not.
struct ParameterTensor {
  std::string name;
  std::int64_t rows = 0, cols = 0;
  bool linear = false;
  std::int64_t elements() const { return rows * cols; }
};

// The model's trained tensors: embedding [vocab x dim]; per block rms_att [1 x dim],
// wq [dim x dim], wk, wv [kv_dim x dim], wo [dim x dim], rms_ffn [1 x dim], w1, w3
// [hidden x dim], w2 [dim x hidden]; rms_final [1 x dim]; and, when separate_classifier, the
// classifier [vocab x dim]. The engine ties the classifier to the embedding (model_config.hpp);
// the public checkpoints of Llama 3.1 and Qwen2.5 do not (config.json: tie_word_embeddings
// false), so their true parameter counts need separate_classifier = true: 8,030,261,248 for
// Llama 3.1 8B.
std::vector<ParameterTensor> parameter_tensors(const ModelConfig& model, bool separate_classifier);
std::int64_t parameter_count(const std::vector<ParameterTensor>& tensors);

// How many bytes each model state takes per parameter: a named set (state_precision below).
struct StatePrecision {
  static constexpr int kScaleBytes = 4;  // every scale factor is an FP32
  std::string name;
  int weight_bytes = 2;          // per element of every weight (or of the non-linear ones when linear_weight_bytes is set)
  int linear_weight_bytes = 0;   // per element of a linear weight; 0: weight_bytes
  int weight_block = 0;          // B > 0: one scale per B x B block of each linear weight (DeepSeek-V3: 128)
  int gradient_bytes = 2;        // per element of every gradient
  int master_bytes = 4;          // FP32 master copy of every weight, kept by the optimizer
  int moment_bytes = 4;          // per element of each Adam moment
  int moments = 2;               // Adam: first and second
  int moment_group = 0;          // G > 0: one scale per 1 x G group of each moment, along a row (COAT: 128)
};

// "paper", "bf16_moments", "fp8_weights_fp8_moments" (each documented with its source in
// zero_sharding.cpp). Throws std::invalid_argument "states: 'x' is not one of ...".
StatePrecision state_precision(std::string_view name);
std::vector<std::string> state_precision_names();

// Whole-model bytes of each state, unsharded.
struct ModelStateBytes {
  std::int64_t weights = 0, gradients = 0, optimizer = 0;
  std::int64_t total() const { return weights + gradients + optimizer; }
  bool operator==(const ModelStateBytes&) const = default;
};

// From the shapes: every tensor's elements at its state's width, plus its scale factors
// (ceil(rows / B) ceil(cols / B) per FP8 linear weight, rows ceil(cols / G) per FP8 moment).
ModelStateBytes model_state_bytes(const std::vector<ParameterTensor>& tensors, const StatePrecision& states);
// From a bare parameter count (no shapes: the paper's 7.5B example, a "trillion-parameter"
// claim): every parameter counted as a linear weight's, as if it were one flat tensor, so the
// scales are ceil(Psi / B^2) and ceil(Psi / G) per moment. Exact for the sets without scales;
// for the FP8 set it undercounts partial blocks a real model's shapes would round up.
// Throws std::invalid_argument "parameters: ..." unless 1 <= parameters <= kMaxParameters.
inline constexpr std::int64_t kMaxParameters = 1'000'000'000'000'000;  // 1e15: 16e15 bytes stay far from int64's 9.2e18
ModelStateBytes model_state_bytes(std::int64_t parameters, const StatePrecision& states);

// What one of `ranks` data-parallel ranks holds at ZeRO stage `stage` (header table).
// Throws std::invalid_argument naming the field: "zero_stage: ..." unless 0 <= stage <= 3,
// "ranks: ..." unless ranks >= 1.
ModelStateBytes zero_bytes_per_rank(const ModelStateBytes& whole, int stage, std::int64_t ranks);

// Spec values, the whole text a decimal integer. Throw std::invalid_argument
// "zero_stage: must be 0, 1, 2 or 3, not '4'" and "ranks: must be an integer >= 1, not '0'".
int parse_zero_stage(std::string_view text);
std::int64_t parse_ranks(std::string_view text);

}  // namespace fp8lab::train
