#include "harness/train/zero_sharding.hpp"

#include <charconv>
#include <stdexcept>

namespace fp8lab::train {
namespace {

// a, b >= 0, b > 0; no a + b - 1 that could overflow for a huge rank count.
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return a / b + (a % b != 0); }

// The named state-precision sets, bytes per parameter of weights / gradients / optimizer states.
std::vector<StatePrecision> named_sets() {
  // "paper" (2 / 2 / 12): the ZeRO paper's mixed-precision Adam (Rajbhandari et al. 2020,
  // sec. 3.1): 16-bit weights and gradients, and K = 12 bytes of optimizer state, an FP32 master
  // copy plus the FP32 momentum and variance. The paper says fp16; BF16 has the same width.
  StatePrecision paper;
  paper.name = "paper";

  // "bf16_moments" (2 / 2 / 4 + 2 + 2 = 8): DeepSeek-V3 (technical report, arXiv 2412.19437,
  // sec. 3.3.3, low-precision optimizer states) tracks AdamW's two moments in BF16 and keeps the
  // FP32 master weights. DeepSeek-V3 also keeps the gradients it accumulates for the optimizer in
  // FP32 (4 bytes); this set keeps "paper"'s 2 so that it differs from "paper" in the moments only.
  StatePrecision bf16_moments;
  bf16_moments.name = "bf16_moments";
  bf16_moments.moment_bytes = 2;

  // "fp8_weights_fp8_moments" (about 1 / 2 / 4 + 1 + 1, plus scales): linear weights in FP8
  // (1 byte) with one FP32 scale per 128 x 128 block, as DeepSeek-V3 quantizes weights
  // (sec. 3.3.2); the embedding, the classifier and the norm gains stay BF16, as DeepSeek-V3
  // keeps those modules in their original precision (sec. 3.3.1); BF16 gradients; the FP32
  // master copy; both Adam moments in FP8 (1 byte) with one FP32 scale per 1 x 128 group, as
  // COAT keeps its optimizer states (Xi et al. 2024, "COAT: Compressing Optimizer states and
  // Activation for memory-efficient FP8 Training", group size 1 x 128).
  StatePrecision fp8;
  fp8.name = "fp8_weights_fp8_moments";
  fp8.linear_weight_bytes = 1;
  fp8.weight_block = 128;
  fp8.moment_bytes = 1;
  fp8.moment_group = 128;
  return {paper, bf16_moments, fp8};
}

// Bytes of one rows x cols tensor's weights / gradients / optimizer states.
ModelStateBytes tensor_bytes(std::int64_t rows, std::int64_t cols, bool linear, const StatePrecision& s) {
  const std::int64_t n = rows * cols;
  ModelStateBytes b;
  const bool narrow = linear && s.linear_weight_bytes > 0;
  b.weights = n * (narrow ? s.linear_weight_bytes : s.weight_bytes);
  if (narrow && s.weight_block > 0)
    b.weights += ceil_div(rows, s.weight_block) * ceil_div(cols, s.weight_block) * StatePrecision::kScaleBytes;
  b.gradients = n * s.gradient_bytes;
  std::int64_t moment = n * s.moment_bytes;
  // 1x128 groups along each row. The training loop's FP8 moments (harness/train/adamw.hpp) group
  // 128 consecutive elements of the flattened tensor instead: the same count whenever a row's
  // length is a multiple of 128 (every tensor of the Llama 3.1 presets), not for narrower rows
  // (stories260K's dim 64, where one of its groups spans two rows).
  if (s.moment_group > 0) moment += rows * ceil_div(cols, s.moment_group) * StatePrecision::kScaleBytes;
  b.optimizer = n * s.master_bytes + s.moments * moment;
  return b;
}

std::int64_t parse_decimal(std::string_view text) {
  std::int64_t x = -1;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), x);
  if (error != std::errc() || end != text.data() + text.size()) return -1;
  return x;
}

}  // namespace

std::vector<ParameterTensor> parameter_tensors(const ModelConfig& m, bool separate_classifier) {
  m.validate();
  const std::int64_t dim = m.dim;
  std::vector<ParameterTensor> t{{"embedding", m.vocab, dim, false}};
  const auto linear = [&](const std::string& name) {
    const auto [rows, cols] = linear_layer_shape(m, name);
    t.push_back({name, rows, cols, true});
  };
  for (int l = 0; l < m.layers; ++l) {
    const std::string p = "L" + std::to_string(l) + ".";
    t.push_back({p + "rms_att", 1, dim, false});
    for (const char* kind : {"wq", "wk", "wv", "wo"}) linear(p + kind);
    t.push_back({p + "rms_ffn", 1, dim, false});
    for (const char* kind : {"w1", "w2", "w3"}) linear(p + kind);
  }
  t.push_back({"rms_final", 1, dim, false});
  if (separate_classifier) t.push_back({"classifier", m.vocab, dim, false});
  return t;
}

std::int64_t parameter_count(const std::vector<ParameterTensor>& tensors) {
  std::int64_t n = 0;
  for (const ParameterTensor& t : tensors) n += t.elements();
  return n;
}

StatePrecision state_precision(std::string_view name) {
  std::string known;
  for (const StatePrecision& s : named_sets()) {
    if (s.name == name) return s;
    known += (known.empty() ? "" : ", ") + s.name;
  }
  throw std::invalid_argument("states: '" + std::string(name) + "' is not one of " + known);
}

std::vector<std::string> state_precision_names() {
  std::vector<std::string> names;
  for (const StatePrecision& s : named_sets()) names.push_back(s.name);
  return names;
}

ModelStateBytes model_state_bytes(const std::vector<ParameterTensor>& tensors, const StatePrecision& states) {
  ModelStateBytes sum;
  for (const ParameterTensor& t : tensors) {
    const ModelStateBytes b = tensor_bytes(t.rows, t.cols, t.linear, states);
    sum.weights += b.weights;
    sum.gradients += b.gradients;
    sum.optimizer += b.optimizer;
  }
  return sum;
}

ModelStateBytes model_state_bytes(std::int64_t parameters, const StatePrecision& s) {
  if (parameters < 1 || parameters > kMaxParameters)
    throw std::invalid_argument("parameters: " + std::to_string(parameters) + " is outside 1 .. 1e15");
  ModelStateBytes b;
  const int weight_bytes = s.linear_weight_bytes > 0 ? s.linear_weight_bytes : s.weight_bytes;
  b.weights = parameters * weight_bytes;
  if (s.linear_weight_bytes > 0 && s.weight_block > 0)
    b.weights += ceil_div(parameters, std::int64_t{s.weight_block} * s.weight_block) * StatePrecision::kScaleBytes;
  b.gradients = parameters * s.gradient_bytes;
  std::int64_t moment = parameters * s.moment_bytes;
  if (s.moment_group > 0) moment += ceil_div(parameters, s.moment_group) * StatePrecision::kScaleBytes;
  b.optimizer = parameters * s.master_bytes + s.moments * moment;
  return b;
}

ModelStateBytes zero_bytes_per_rank(const ModelStateBytes& whole, int stage, std::int64_t ranks) {
  if (stage < 0 || stage > 3)
    throw std::invalid_argument("zero_stage: must be 0, 1, 2 or 3, not " + std::to_string(stage));
  if (ranks < 1) throw std::invalid_argument("ranks: must be an integer >= 1, not " + std::to_string(ranks));
  const auto shard = [&](std::int64_t bytes) { return ceil_div(bytes, ranks); };
  return {stage >= 3 ? shard(whole.weights) : whole.weights, stage >= 2 ? shard(whole.gradients) : whole.gradients,
          stage >= 1 ? shard(whole.optimizer) : whole.optimizer};
}

int parse_zero_stage(std::string_view text) {
  const std::int64_t stage = parse_decimal(text);
  if (stage < 0 || stage > 3)
    throw std::invalid_argument("zero_stage: must be 0, 1, 2 or 3, not '" + std::string(text) + "'");
  return static_cast<int>(stage);
}

std::int64_t parse_ranks(std::string_view text) {
  const std::int64_t ranks = parse_decimal(text);
  if (ranks < 1) throw std::invalid_argument("ranks: must be an integer >= 1, not '" + std::string(text) + "'");
  return ranks;
}

}  // namespace fp8lab::train
