#include "harness/train/gradient_compression.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>

namespace fp8lab::train {
namespace {

bool all_finite(std::span<const float> x) {
  return std::all_of(x.begin(), x.end(), [](float v) { return std::isfinite(v); });
}

// |q| for a = |t| < L under the configured rounding (the header's definition).
std::int32_t round_magnitude(float a, RoundingMode rounding, std::uint64_t stream, std::uint64_t index) {
  if (rounding == RoundingMode::nearest) return static_cast<std::int32_t>(std::nearbyint(a));  // ties to even
  // a < L < 2^15, so floor and a - lo are exact in FP32 and (a - lo) 2^32 < 2^32 fits.
  const float lo = std::floor(a);
  const auto fraction = static_cast<std::uint32_t>((a - lo) * 0x1p32f);  // F, truncated
  return static_cast<std::int32_t>(lo) + (stochastic_draw(stream, index) < fraction ? 1 : 0);
}

void check_size(std::span<const float> out, std::size_t n, const char* what) {
  if (out.size() != n)
    throw std::invalid_argument(std::string(what) + ": output has " + std::to_string(out.size()) +
                                " elements, expected " + std::to_string(n));
}

}  // namespace

CompressionKind parse_compression_kind(const std::string& text) {
  if (text == "none") return CompressionKind::none;
  if (text == "quantize") return CompressionKind::quantize;
  if (text == "topk") return CompressionKind::topk;
  throw std::invalid_argument("compression: '" + text + "' is not one of none, quantize, topk");
}

const char* compression_kind_name(CompressionKind kind) {
  switch (kind) {
    case CompressionKind::quantize: return "quantize";
    case CompressionKind::topk: return "topk";
    case CompressionKind::none: break;
  }
  return "none";
}

RoundingMode parse_compression_rounding(const std::string& text) {
  if (text == "nearest") return RoundingMode::nearest;
  if (text == "stochastic") return RoundingMode::stochastic;
  throw std::invalid_argument("compression_rounding: '" + text + "' is not one of nearest, stochastic");
}

const char* compression_rounding_name(RoundingMode mode) {
  return mode == RoundingMode::stochastic ? "stochastic" : "nearest";
}

void CompressionConfig::validate() const {
  if (kind == CompressionKind::quantize) {
    if (bits < 4 || bits > 16)
      throw std::invalid_argument("compression_bits: must be in 4..16, got " + std::to_string(bits));
    if (block < 0)
      throw std::invalid_argument("compression_block: must be 0 (one scale per tensor) or a positive element count, got " +
                                  std::to_string(block));
    if (rounding != RoundingMode::nearest && rounding != RoundingMode::stochastic)
      throw std::invalid_argument("compression_rounding: must be nearest or stochastic");
  }
  if (kind == CompressionKind::topk && !(topk_ratio > 0.0 && topk_ratio <= 1.0))  // NaN fails too
    throw std::invalid_argument("topk_ratio: must be in (0, 1], got " + std::to_string(topk_ratio));
}

std::int64_t topk_count(std::int64_t n, double ratio) {
  if (n <= 0) return 0;
  const double product = ratio * static_cast<double>(n);
  const double nearest = std::round(product);
  const double k = std::fabs(product - nearest) <= 1e-9 * std::max(1.0, nearest) ? nearest : std::ceil(product);
  return std::clamp(static_cast<std::int64_t>(k), std::int64_t{1}, n);
}

std::uint64_t compressed_bits(const CompressionConfig& config, std::int64_t n) {
  const auto elements = static_cast<std::uint64_t>(std::max<std::int64_t>(n, 0));
  switch (config.kind) {
    case CompressionKind::quantize: {
      const std::uint64_t group = config.block == 0 ? elements : static_cast<std::uint64_t>(config.block);
      const std::uint64_t groups = elements == 0 ? 0 : (elements + group - 1) / group;
      return static_cast<std::uint64_t>(config.bits) * elements + 32 * groups;
    }
    case CompressionKind::topk: return 64 * static_cast<std::uint64_t>(topk_count(n, config.topk_ratio));
    case CompressionKind::none: break;
  }
  return 32 * elements;
}

double compression_ratio(std::uint64_t bits, std::uint64_t elements) {
  return elements == 0 ? 1.0 : static_cast<double>(bits) / (32.0 * static_cast<double>(elements));
}

double compression_ratio(const CompressionConfig& config, std::int64_t n) {
  return compression_ratio(compressed_bits(config, n), static_cast<std::uint64_t>(std::max<std::int64_t>(n, 0)));
}

std::uint64_t compression_stream(std::uint64_t seed, std::int64_t step, std::size_t worker, std::size_t tensor) {
  return splitmix64_output(splitmix64_output(splitmix64_output(seed, static_cast<std::uint64_t>(step)), worker), tensor);
}

QuantizedGroups quantize_groups(std::span<const float> x, int bits, std::int64_t block, RoundingMode rounding,
                                std::uint64_t stream) {
  if (bits < 4 || bits > 16) throw std::invalid_argument("quantize_groups: bits must be in 4..16");
  if (block < 0) throw std::invalid_argument("quantize_groups: block must be >= 0");
  if (!all_finite(x)) throw std::invalid_argument("quantize_groups: the input has a non-finite element");
  const auto n = static_cast<std::int64_t>(x.size());
  const std::int32_t levels = (std::int32_t{1} << (bits - 1)) - 1;  // L
  QuantizedGroups out;
  out.group = block == 0 ? n : block;
  out.q.assign(x.size(), 0);
  for (std::int64_t begin = 0; begin < n; begin += out.group) {
    const std::int64_t end = std::min(n, begin + out.group);
    float amax = 0.0f;
    for (std::int64_t i = begin; i < end; ++i) amax = std::max(amax, std::fabs(x[static_cast<std::size_t>(i)]));
    const float scale = amax / static_cast<float>(levels);
    out.scales.push_back(scale);
    if (scale == 0.0f) continue;  // amax 0, or amax / L below FP32's smallest subnormal: q stays 0
    for (std::int64_t i = begin; i < end; ++i) {
      const float t = x[static_cast<std::size_t>(i)] / scale;
      const float a = std::fabs(t);
      const std::int32_t magnitude =
          a >= static_cast<float>(levels) ? levels : round_magnitude(a, rounding, stream, static_cast<std::uint64_t>(i));
      out.q[static_cast<std::size_t>(i)] = std::signbit(t) ? -magnitude : magnitude;
    }
  }
  return out;
}

void dequantize_groups(const QuantizedGroups& quantized, std::span<float> out) {
  check_size(out, quantized.q.size(), "dequantize_groups");
  for (std::size_t i = 0; i < out.size(); ++i) {
    // |q| < 2^15 is exact in FP32, so the product rounds once; scale >= 0, so q = 0 gives +0.
    out[i] = static_cast<float>(quantized.q[i]) * quantized.scales[i / static_cast<std::size_t>(quantized.group)];
  }
}

TopKSelection select_topk(std::span<const float> x, std::int64_t k) {
  if (x.size() >= (std::size_t{1} << 32)) throw std::invalid_argument("select_topk: indices are 32-bit, the tensor has 2^32 elements or more");
  if (k < 0 || static_cast<std::size_t>(k) > x.size()) throw std::invalid_argument("select_topk: k must be in 0..n");
  if (!all_finite(x)) throw std::invalid_argument("select_topk: the input has a non-finite element");
  std::vector<std::uint32_t> order(x.size());
  std::iota(order.begin(), order.end(), 0u);
  // A strict total order (larger |x| first, then the lower index), so the first k are unique.
  const auto before = [&](std::uint32_t a, std::uint32_t b) {
    const float fa = std::fabs(x[a]), fb = std::fabs(x[b]);
    return fa > fb || (fa == fb && a < b);
  };
  const auto kth = order.begin() + k;
  std::nth_element(order.begin(), kth, order.end(), before);
  order.erase(kth, order.end());
  std::sort(order.begin(), order.end());
  TopKSelection selection;
  selection.values.reserve(order.size());
  for (const std::uint32_t i : order) selection.values.push_back(x[i]);
  selection.indices = std::move(order);
  return selection;
}

void scatter_topk(const TopKSelection& selection, std::span<float> out) {
  std::fill(out.begin(), out.end(), 0.0f);
  for (std::size_t j = 0; j < selection.indices.size(); ++j) {
    if (selection.indices[j] >= out.size()) throw std::invalid_argument("scatter_topk: an index lies past the output");
    out[selection.indices[j]] = selection.values[j];
  }
}

void compress_decompress(const CompressionConfig& config, std::span<const float> x, std::uint64_t stream,
                         std::span<float> out) {
  check_size(out, x.size(), "compress_decompress");
  switch (config.kind) {
    case CompressionKind::quantize:
      dequantize_groups(quantize_groups(x, config.bits, config.block, config.rounding, stream), out);
      return;
    case CompressionKind::topk:
      scatter_topk(select_topk(x, topk_count(static_cast<std::int64_t>(x.size()), config.topk_ratio)), out);
      return;
    case CompressionKind::none: break;
  }
  std::copy(x.begin(), x.end(), out.begin());
}

WorkerCompressor::WorkerCompressor(const CompressionConfig& config, std::size_t worker)
    : config_(config), worker_(worker) {
  config_.validate();
}

void WorkerCompressor::register_tensor(std::size_t tensor, std::size_t n) {
  if (tensor >= sizes_.size()) {
    sizes_.resize(tensor + 1, -1);
    residuals_.resize(tensor + 1);
  }
  if (sizes_[tensor] < 0) {
    sizes_[tensor] = static_cast<std::int64_t>(n);
    if (keeps_residuals()) residuals_[tensor].assign(n, 0.0f);
  } else if (static_cast<std::size_t>(sizes_[tensor]) != n) {
    throw std::invalid_argument("WorkerCompressor: tensor " + std::to_string(tensor) + " has " +
                                std::to_string(sizes_[tensor]) + " elements, the gradient " + std::to_string(n));
  }
}

std::uint64_t WorkerCompressor::compress_into(std::size_t tensor, std::span<const float> gradient, std::int64_t step,
                                              std::span<float> out) {
  const std::size_t n = gradient.size();
  check_size(out, n, "WorkerCompressor");
  register_tensor(tensor, n);
  if (!has_step_ || step != step_) {
    has_step_ = true;
    step_ = step;
    step_bits_ = step_elements_ = 0;
  }
  const std::uint64_t bits = compressed_bits(config_, static_cast<std::int64_t>(n));
  step_bits_ += bits;
  total_bits_ += bits;
  step_elements_ += n;
  total_elements_ += n;

  std::span<const float> x = gradient;
  std::vector<float>& residual = residuals_[tensor];
  const bool feedback = keeps_residuals();
  if (feedback) {
    x_.resize(n);
    for (std::size_t i = 0; i < n; ++i) x_[i] = gradient[i] + residual[i];
    x = x_;
  }
  if (!all_finite(x)) {  // an overflowed step: pass it on for the loss scaler to see, keep r
    std::copy(x.begin(), x.end(), out.begin());
    return bits;
  }
  compress_decompress(config_, x, compression_stream(config_.seed, step, worker_, tensor), out);
  if (feedback)
    for (std::size_t i = 0; i < n; ++i) residual[i] = x[i] - out[i];
  return bits;
}

CompressedTensor WorkerCompressor::compress(std::size_t tensor, std::span<const float> gradient, std::int64_t step) {
  CompressedTensor sent;
  sent.values.resize(gradient.size());
  sent.bits_sent = compress_into(tensor, gradient, step, sent.values);
  return sent;
}

std::size_t WorkerCompressor::residual_bytes() const {
  std::size_t bytes = 0;
  for (const std::vector<float>& r : residuals_) bytes += r.size() * sizeof(float);
  return bytes;
}

std::span<const float> WorkerCompressor::residual(std::size_t tensor) const {
  if (tensor >= residuals_.size()) return {};
  return residuals_[tensor];
}

void WorkerCompressor::restore_residual(std::size_t tensor, std::span<const float> values) {
  if (!keeps_residuals()) {
    if (!values.empty())
      throw std::invalid_argument("WorkerCompressor: no residuals without error feedback, got " +
                                  std::to_string(values.size()) + " values for tensor " + std::to_string(tensor));
    return;
  }
  if (tensor < sizes_.size() && sizes_[tensor] >= 0 && static_cast<std::size_t>(sizes_[tensor]) != values.size())
    throw std::invalid_argument("WorkerCompressor: residual of tensor " + std::to_string(tensor) + " has " +
                                std::to_string(sizes_[tensor]) + " elements, the restored one " +
                                std::to_string(values.size()));
  register_tensor(tensor, values.size());
  std::copy(values.begin(), values.end(), residuals_[tensor].begin());
}

}  // namespace fp8lab::train
