#include "harness/train/adamw.hpp"

#include <cmath>
#include <stdexcept>

#include "kernels/formats/float_formats.hpp"

namespace fp8lab::train {

MomentFormat parse_moment_format(const std::string& text) {
  if (text == "fp32") return MomentFormat::fp32;
  if (text == "bf16") return MomentFormat::bf16;
  throw std::invalid_argument("moments '" + text + "' is not one of fp32, bf16");
}

const char* moment_format_name(MomentFormat format) { return format == MomentFormat::fp32 ? "fp32" : "bf16"; }

void AdamWConfig::validate() const {
  const auto require = [](bool ok, const char* field, const std::string& what) {
    if (!ok) throw std::invalid_argument(std::string(field) + ": " + what);
  };
  require(std::isfinite(beta1) && beta1 >= 0 && beta1 < 1, "beta1", "must be in [0, 1)");
  require(std::isfinite(beta2) && beta2 >= 0 && beta2 < 1, "beta2", "must be in [0, 1)");
  require(std::isfinite(eps) && eps > 0, "eps", "must be finite and > 0");
  require(std::isfinite(weight_decay) && weight_decay >= 0, "weight_decay", "must be finite and >= 0");
}

AdamWMoments::AdamWMoments(std::size_t count, MomentFormat format) : count_(count), format_(format) {
  if (format == MomentFormat::fp32) {
    m32_.assign(count, 0.0f);
    v32_.assign(count, 0.0f);
  } else {
    m16_.assign(count, 0);
    v16_.assign(count, 0);
  }
}

std::size_t AdamWMoments::bytes() const { return 2 * count_ * (format_ == MomentFormat::fp32 ? 4 : 2); }

float AdamWMoments::m(std::size_t i) const { return format_ == MomentFormat::fp32 ? m32_[i] : decode<BF16>(m16_[i]); }
float AdamWMoments::v(std::size_t i) const { return format_ == MomentFormat::fp32 ? v32_[i] : decode<BF16>(v16_[i]); }

void AdamWMoments::set(std::size_t i, float m, float v) {
  if (format_ == MomentFormat::fp32) {
    m32_[i] = m;
    v32_[i] = v;
  } else {
    m16_[i] = static_cast<std::uint16_t>(encode<BF16>(m, Saturation::nosat));
    v16_[i] = static_cast<std::uint16_t>(encode<BF16>(v, Saturation::nosat));
  }
}

void adamw_update(std::span<float> param, std::span<const float> gradient, AdamWMoments& moments,
                  const AdamWConfig& config, std::int64_t t, double lr, double decay) {
  if (gradient.size() != param.size() || moments.size() != param.size())
    throw std::invalid_argument("adamw_update: parameter, gradient and moments differ in size");
  if (t < 1) throw std::invalid_argument("adamw_update: step t must be >= 1");
  // The scalars as PyTorch forms them: in double, then one rounding to FP32 each.
  const auto f32 = [](double x) { return static_cast<float>(x); };
  const float keep = f32(1.0 - lr * decay);
  const float one_minus_beta1 = f32(1.0 - config.beta1);
  const float beta2 = f32(config.beta2), one_minus_beta2 = f32(1.0 - config.beta2);
  const float bias_correction2_sqrt = f32(std::sqrt(1.0 - std::pow(config.beta2, static_cast<double>(t))));
  const float eps = f32(config.eps);
  const float negative_step_size = f32(-lr / (1.0 - std::pow(config.beta1, static_cast<double>(t))));
  for (std::size_t i = 0; i < param.size(); ++i) {
    const float g = gradient[i];
    const float p = param[i] * keep;
    const float m = moments.m(i) + one_minus_beta1 * (g - moments.m(i));
    const float v = moments.v(i) * beta2 + (one_minus_beta2 * g) * g;
    const float denom = std::sqrt(v) / bias_correction2_sqrt + eps;
    param[i] = p + (negative_step_size * m) / denom;
    moments.set(i, m, v);
  }
}

}  // namespace fp8lab::train
