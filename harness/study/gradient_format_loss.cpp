#include "harness/study/gradient_format_loss.hpp"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "harness/metrics/error_metrics.hpp"
#include "kernels/cpu/quantize.hpp"

namespace fp8lab {
namespace {

// One stored value: what reads back (before unscaling) and how it got there.
struct Stored {
  float value = 0;
  bool overflowed = false;
};

template <class F>
bool is_subnormal(float stored) {
  return stored != 0.0f && std::fabs(stored) < exact_pow2(FormatLayout<F>::min_exponent);
}

// fp16 / bf16: the cast a backward pass in that type makes; overflow gives inf.
template <class F>
Stored cast_to_inf(float x) {
  const float y = decode<F>(encode<F>(x, Saturation::nosat));
  return {y, std::isinf(y)};
}

// Overflow as float_formats.hpp defines it: the correctly rounded value exceeds max finite, i.e.
// the encoder without saturation gives its overflow code (inf, or NaN for E4M3). Judged on the
// value handed to the encoder, before saturation clamps it. (Not |v| > max: with current
// scaling, fl32(amax * fl32(1/sf)) often lands an FP32 ulp above max and rounds to max itself.)
template <class F>
bool overflows(float v) {
  return (encode<F>(v, Saturation::nosat) & FormatLayout<F>::magnitude_mask) > F::max_finite_code;
}

// FP8: saturating, as the quantizers are.
template <class F>
Stored cast_saturating(float v) {
  return {decode<F>(encode<F>(v, Saturation::satfinite)), overflows<F>(v)};
}

template <class F>
void count_format(std::span<const float> scaled, const GradientFormat& format, std::int64_t rows, std::int64_t cols,
                  std::vector<float>& stored, GradientFormatLoss& loss) {
  const std::size_t n = scaled.size();
  stored.resize(n);
  if (format.kind == GradientFormat::Kind::fp16 || format.kind == GradientFormat::Kind::bf16 ||
      format.kind == GradientFormat::Kind::fp8_cast) {
    for (std::size_t i = 0; i < n; ++i) {
      const Stored s = format.kind == GradientFormat::Kind::fp8_cast ? cast_saturating<F>(scaled[i]) : cast_to_inf<F>(scaled[i]);
      stored[i] = s.value;
      loss.overflowed += s.overflowed;
      loss.subnormal += is_subnormal<F>(s.value);
    }
    return;
  }
  // Current scaling: the project's quantizer, then the value it encoded, x * fl32(1 / sf), for
  // the overflow count; the dequantized value fl32(decode(q) * sf) is what reads back.
  const QuantizedTensor q = cpu::quantize(scaled, rows, cols, {format.fp8, format.granularity, ScaleRule::fp32});
  stored = cpu::dequantize(q);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) {
      const auto i = static_cast<std::size_t>(r * cols + c);
      loss.overflowed += overflows<F>(scaled[i] * (1.0f / q.scale_of(r, c)));
      loss.subnormal += is_subnormal<F>(decode<F>(q.codes[i]));
    }
}

}  // namespace

double GradientFormat::max_finite() const {
  switch (kind) {
    case Kind::fp16: return fp8lab::max_finite<FP16>();
    case Kind::bf16: return fp8lab::max_finite<BF16>();
    default: return format_max(fp8);
  }
}

GradientFormat parse_gradient_format(std::string_view text) {
  if (text == "fp16") return {GradientFormat::Kind::fp16};
  if (text == "bf16") return {GradientFormat::Kind::bf16};
  const std::size_t colon = text.find(':');
  const std::string_view name = text.substr(0, colon);
  if (name != "e4m3" && name != "e5m2")
    throw std::invalid_argument("gradient format '" + std::string(text) +
                                "' is not one of fp16, bf16, e4m3, e5m2 (a cast), or e4m3:G / e5m2:G (current "
                                "scaling of granularity G, e.g. e4m3:tensor, e5m2:tile:1x128)");
  const Fp8Format f = parse_fp8_format(name);
  if (colon == std::string_view::npos) return {GradientFormat::Kind::fp8_cast, f};
  return {GradientFormat::Kind::fp8_scaled, f, Granularity::parse(text.substr(colon + 1))};
}

GradientFormatLoss gradient_format_loss(std::span<const float> gradient, std::span<const double> reference,
                                        std::int64_t rows, std::int64_t cols, const GradientFormat& format,
                                        int log2_scale) {
  const std::size_t n = gradient.size();
  if (reference.size() != n || rows < 0 || cols < 0 || static_cast<std::size_t>(rows * cols) != n)
    throw std::invalid_argument("gradient_format_loss: " + std::to_string(n) + " values, " + std::to_string(reference.size()) +
                                " reference values, shape " + std::to_string(rows) + "x" + std::to_string(cols));
  // The loss-scaled FP32 gradient: a power of two times an FP32 value, rounded once (exact
  // unless FP32 over- or underflows).
  std::vector<float> scaled(n);
  for (std::size_t i = 0; i < n; ++i) scaled[i] = static_cast<float>(std::ldexp(static_cast<double>(gradient[i]), log2_scale));
  GradientFormatLoss loss;
  loss.values = static_cast<std::int64_t>(n);
  std::vector<float> stored;
  switch (format.kind) {
    case GradientFormat::Kind::fp16: count_format<FP16>(scaled, format, rows, cols, stored, loss); break;
    case GradientFormat::Kind::bf16: count_format<BF16>(scaled, format, rows, cols, stored, loss); break;
    default:
      if (format.fp8 == Fp8Format::e4m3) count_format<E4M3>(scaled, format, rows, cols, stored, loss);
      else count_format<E5M2>(scaled, format, rows, cols, stored, loss);
  }
  std::vector<double> unscaled(n), fp32(n);
  for (std::size_t i = 0; i < n; ++i) {
    unscaled[i] = std::ldexp(static_cast<double>(stored[i]), -log2_scale);
    fp32[i] = gradient[i];
    if (gradient[i] != 0.0f) {
      ++loss.nonzero;
      loss.flushed += stored[i] == 0.0f;
    }
  }
  if (loss.nonzero > 0) {
    const auto fraction = [&](std::int64_t count) { return static_cast<double>(count) / static_cast<double>(loss.nonzero); };
    loss.flushed_fraction = fraction(loss.flushed);
    loss.overflowed_fraction = fraction(loss.overflowed);
    loss.subnormal_fraction = fraction(loss.subnormal);
  }
  loss.rel_frobenius = error_metrics(std::span<const double>(unscaled), reference, 0.0).rel_frobenius;
  loss.format_rel_frobenius = error_metrics(std::span<const double>(unscaled), std::span<const double>(fp32), 0.0).rel_frobenius;
  return loss;
}

}  // namespace fp8lab
