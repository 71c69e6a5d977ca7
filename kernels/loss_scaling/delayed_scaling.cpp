#include "kernels/loss_scaling/delayed_scaling.hpp"

#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "kernels/formats/float_formats.hpp"

namespace fp8lab {

const char* amax_reduction_name(AmaxReduction r) { return r == AmaxReduction::max ? "max" : "most_recent"; }

AmaxReduction parse_amax_reduction(std::string_view text) {
  if (text == "max") return AmaxReduction::max;
  if (text == "most_recent") return AmaxReduction::most_recent;
  throw std::invalid_argument("'" + std::string(text) + "' is not one of max, most_recent");
}

void DelayedScalingConfig::validate() const {
  auto bad = [](const char* field, const std::string& message) {
    throw std::invalid_argument(std::string("delayed scaling: field '") + field + "': " + message);
  };
  // 2^20 steps of history is far past any recipe (TE's default is 1024) and bounds the memory.
  if (history_length < 1 || history_length > (std::int64_t{1} << 20))
    bad("history_length", "must lie in [1, 1048576], got " + std::to_string(history_length));
  // Beyond 64 the target maximum fmt_max * 2^-margin nears FP32's subnormals: no recipe wants it.
  if (margin < 0 || margin > 64) bad("margin", "must lie in [0, 64], got " + std::to_string(margin));
}

DelayedScaler::DelayedScaler(const DelayedScalingConfig& config) : config_(config) {
  config_.validate();
  // TE: fp8_max * std::pow(2.f, -margin) in FP32; both factors are powers of two times an
  // FP8 value, so the product is exact.
  scaled_max_ = format_max(config_.format) * std::ldexp(1.0f, -config_.margin);
  ring_.assign(static_cast<std::size_t>(config_.history_length), 0.0f);
}

DelayedScaler::DelayedScaler(const DelayedScalingConfig& config, std::span<const float> history, float scale)
    : DelayedScaler(config) {
  if (history.size() != ring_.size())
    throw std::invalid_argument("delayed scaling: field 'history': " + std::to_string(history.size()) +
                                " entries, the config keeps " + std::to_string(ring_.size()));
  if (!std::isfinite(scale) || !(scale > 0))
    throw std::invalid_argument("delayed scaling: field 'scale': must be finite and > 0");
  const std::size_t n = ring_.size();
  for (std::size_t k = 0; k < n; ++k) ring_[(n - k) % n] = history[k];  // head_ = 0 holds history[0]
  scale_ = scale;
}

float DelayedScaler::scale_inverse() const { return 1.0f / scale_; }

void DelayedScaler::update(float amax) {
  head_ = (head_ + 1) % ring_.size();  // the oldest entry drops out of the window
  ring_[head_] = amax;
  float reduced = amax;
  if (config_.reduction == AmaxReduction::max) {
    reduced = 0.0f;
    for (float a : ring_) reduced = std::fmax(reduced, a);  // fmax passes over NaN, as TE's fmaxf
  }
  if (std::isfinite(reduced) && reduced > 0.0f) {
    scale_ = scaled_max_ / reduced;
    if (std::isinf(scale_)) scale_ = std::numeric_limits<float>::max();
  }
}

std::vector<float> DelayedScaler::history() const {
  std::vector<float> h;
  h.reserve(ring_.size());
  for (std::size_t k = 0; k < ring_.size(); ++k) h.push_back(ring_[(head_ + ring_.size() - k) % ring_.size()]);
  return h;
}

}  // namespace fp8lab
