#include "harness/train/adamw.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "kernels/formats/float_formats.hpp"

namespace fp8lab::train {

namespace {

struct NamedFormat {
  const char* name;
  MomentFormat format;
};
constexpr NamedFormat kFormats[] = {{"fp32", MomentFormat::fp32},
                                    {"bf16", MomentFormat::bf16},
                                    {"e4m3", MomentFormat::e4m3},
                                    {"e4m3_1x128", MomentFormat::e4m3_1x128},
                                    {"e4m3_e5m2", MomentFormat::e4m3_e5m2}};

// The group's scale 2^k, k the smallest integer >= -126 with amax <= max_finite<F>() * 2^k
// (= ceil(log2(amax / fmt_max)) above the floor), from exact exponent arithmetic, not log2:
// with amax = a 2^ea and fmt_max = b 2^eb, a and b in [0.5, 1) (frexp), amax / fmt_max =
// (a / b) 2^(ea - eb) and a / b is in (0.5, 2) (b = 0.875 for both formats), so k = ea - eb when
// a <= b and ea - eb + 1 when a > b. amax is finite and <= 2^127 here, so k <= 128 - 9 + 1.
template <class F>
float pow2_scale(float amax) {
  if (amax == 0.0f) return 1.0f;
  int ea = 0, eb = 0;
  const float a = std::frexp(amax, &ea);  // exact, subnormal amax included
  const float b = std::frexp(max_finite<F>(), &eb);
  const int k = std::max(ea - eb + (a > b ? 1 : 0), -126);
  return std::ldexp(1.0f, k);
}

// Codes and scales of x, groups of `group` consecutive elements (the last one possibly shorter).
//
// Why the re-quantization of decoded values (a checkpoint restore) gives the same values: take a
// group with finite amax > 0, its scale s = 2^k, codes q_i = RNE(x_i / s), decoded y_i = q_i s
// (exact: s >= 2^-126 keeps q_i s on FP32's grid, amax <= 2^127 keeps it finite). RNE is
// monotone, so the largest |q_i| is RNE(amax / s), and quantizing y finds amax_y =
// s RNE(amax / s) and its own scale 2^ky:
//   (1) amax / s <= fmt_max and fmt_max is in the format, so amax_y <= fmt_max s: ky <= k.
//   (2) If k > -126, k is minimal: amax / s > fmt_max / 2, which is in the format too, so
//       amax_y >= (fmt_max / 2) s: ky >= k - 1. If k = -126, ky >= -126 by the floor: ky = k.
// ky = k: y_i / s = q_i, in the format already: the same codes, the same scale.
// ky = k - 1: exactly when amax / s rounds down onto fmt_max / 2 (E4M3: amax / s in (224, 232];
// E5M2: in (28672, 30720)). Then y_i / (s / 2) = 2 q_i, still in the format (doubling a binary
// float is exact while |2 q_i| <= fmt_max): codes 2 q_i, scale s / 2, the same decoded values; and
// the group's largest code is now fmt_max, so one more round trip is case ky = k.
// All-zero groups (s = 1) and NaN scales come back as they were. x_i / s itself is exact unless
// it falls below FP32's normal range, where it and the exact quotient both round to a zero code.
template <class F>
void quantize_groups(std::span<const float> x, std::size_t group, std::span<std::uint8_t> codes,
                     std::span<float> scales) {
  for (std::size_t j = 0; j < scales.size(); ++j) {
    const std::size_t begin = j * group, end = std::min(begin + group, x.size());
    float amax = 0.0f;
    bool finite = true;
    for (std::size_t i = begin; i < end; ++i) {
      finite = finite && std::isfinite(x[i]);
      amax = std::max(amax, std::fabs(x[i]));
    }
    const bool usable = finite && amax <= 0x1p127f;
    const float s = usable ? pow2_scale<F>(amax) : std::numeric_limits<float>::quiet_NaN();
    scales[j] = s;
    for (std::size_t i = begin; i < end; ++i)
      codes[i] = usable ? static_cast<std::uint8_t>(encode<F>(x[i] / s)) : std::uint8_t{0};
  }
}

bool is_fp8(MomentFormat f) { return f != MomentFormat::fp32 && f != MomentFormat::bf16; }

}  // namespace

MomentFormat parse_moment_format(const std::string& text) {
  std::string names;
  for (const NamedFormat& f : kFormats) {
    if (text == f.name) return f.format;
    names += names.empty() ? f.name : std::string(", ") + f.name;
  }
  throw std::invalid_argument("moments: '" + text + "' is not one of " + names);
}

const char* moment_format_name(MomentFormat format) {
  for (const NamedFormat& f : kFormats)
    if (f.format == format) return f.name;
  throw std::invalid_argument("moment_format_name: not a MomentFormat");
}

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
  } else if (format == MomentFormat::bf16) {
    m16_.assign(count, 0);
    v16_.assign(count, 0);
  } else {
    // Zero codes with scale 1: what quantizing all-zero moments gives.
    const bool per_tensor = format != MomentFormat::e4m3_1x128;
    group_ = per_tensor ? std::max<std::size_t>(count, 1) : kMomentGroupSize;
    const std::size_t groups = per_tensor ? 1 : (count + kMomentGroupSize - 1) / kMomentGroupSize;
    m8_.assign(count, 0);
    v8_.assign(count, 0);
    m_scale_.assign(groups, 1.0f);
    v_scale_.assign(groups, 1.0f);
  }
}

bool AdamWMoments::fp8() const { return is_fp8(format_); }

std::size_t AdamWMoments::bytes() const {
  if (fp8()) return m8_.size() + v8_.size() + 4 * (m_scale_.size() + v_scale_.size());
  return 2 * count_ * (format_ == MomentFormat::fp32 ? 4 : 2);
}

float AdamWMoments::m(std::size_t i) const {
  if (format_ == MomentFormat::fp32) return m32_[i];
  if (format_ == MomentFormat::bf16) return decode<BF16>(m16_[i]);
  return decode<E4M3>(m8_[i]) * m_scale_[i / group_];
}

float AdamWMoments::v(std::size_t i) const {
  if (format_ == MomentFormat::fp32) return v32_[i];
  if (format_ == MomentFormat::bf16) return decode<BF16>(v16_[i]);
  const float q = format_ == MomentFormat::e4m3_e5m2 ? decode<E5M2>(v8_[i]) : decode<E4M3>(v8_[i]);
  return q * v_scale_[i / group_];
}

void AdamWMoments::assign(std::span<const float> m, std::span<const float> v) {
  if (m.size() != count_ || v.size() != count_)
    throw std::invalid_argument("AdamWMoments::assign: " + std::to_string(m.size()) + " m and " +
                                std::to_string(v.size()) + " v values for " + std::to_string(count_) + " elements");
  if (!fp8()) {
    for (std::size_t i = 0; i < count_; ++i) set(i, m[i], v[i]);
    return;
  }
  quantize_groups<E4M3>(m, group_, m8_, m_scale_);
  if (format_ == MomentFormat::e4m3_e5m2)
    quantize_groups<E5M2>(v, group_, v8_, v_scale_);
  else
    quantize_groups<E4M3>(v, group_, v8_, v_scale_);
}

void AdamWMoments::set(std::size_t i, float m, float v) {
  if (format_ == MomentFormat::fp32) {
    m32_[i] = m;
    v32_[i] = v;
  } else if (format_ == MomentFormat::bf16) {
    m16_[i] = static_cast<std::uint16_t>(encode<BF16>(m, Saturation::nosat));
    v16_[i] = static_cast<std::uint16_t>(encode<BF16>(v, Saturation::nosat));
  } else {
    throw std::logic_error(std::string("AdamWMoments::set: ") + moment_format_name(format_) +
                           " moments share a scale per group; store them with assign");
  }
}

void adamw_update(std::span<float> param, std::span<const float> gradient, AdamWMoments& moments,
                  const AdamWConfig& config, std::int64_t t, double lr, double decay, const UpdateMask* mask) {
  if (gradient.size() != param.size() || moments.size() != param.size())
    throw std::invalid_argument("adamw_update: parameter, gradient and moments differ in size");
  if (t < 1) throw std::invalid_argument("adamw_update: step t must be >= 1");
  if (mask && mask->selected.size() != param.size())
    throw std::invalid_argument("adamw_update: the mask selects among " + std::to_string(mask->selected.size()) +
                                " elements; the tensor has " + std::to_string(param.size()));
  // The scalars as PyTorch forms them: in double, then one rounding to FP32 each.
  const auto f32 = [](double x) { return static_cast<float>(x); };
  const float keep = f32(1.0 - lr * decay);
  const float one_minus_beta1 = f32(1.0 - config.beta1);
  const float beta2 = f32(config.beta2), one_minus_beta2 = f32(1.0 - config.beta2);
  const float bias_correction2_sqrt = f32(std::sqrt(1.0 - std::pow(config.beta2, static_cast<double>(t))));
  const float eps = f32(config.eps);
  const float negative_step_size = f32(-lr / (1.0 - std::pow(config.beta1, static_cast<double>(t))));
  // FP8 moments are stored per group, so the tensor's new moments are gathered first (in FP32)
  // and quantized at the end; a left element contributes its decoded moments unchanged.
  const bool per_group = is_fp8(moments.format());
  // The FP8 formats' new m and v in FP32 until the whole tensor's groups are stored: 8 transient
  // bytes per element, beside the moments' bytes() (not in the run's byte counts).
  std::vector<float> m_new(per_group ? param.size() : 0), v_new(per_group ? param.size() : 0);
  for (std::size_t i = 0; i < param.size(); ++i) {
    const bool selected = mask == nullptr || mask->selected[i] != 0;
    const bool moments_move = selected || mask->frozen_moments_track;
    float m = moments.m(i), v = moments.v(i);
    if (moments_move) {
      const float g = gradient[i];
      m = m + one_minus_beta1 * (g - m);
      v = v * beta2 + (one_minus_beta2 * g) * g;
    }
    if (selected) {
      const float p = param[i] * keep;
      const float denom = std::sqrt(v) / bias_correction2_sqrt + eps;
      param[i] = p + (negative_step_size * m) / denom;
    }
    if (per_group) {
      m_new[i] = m;
      v_new[i] = v;
    } else if (moments_move) {
      moments.set(i, m, v);
    }
  }
  if (per_group) moments.assign(m_new, v_new);
}

}  // namespace fp8lab::train
