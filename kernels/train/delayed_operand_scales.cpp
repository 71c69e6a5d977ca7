#include "kernels/train/delayed_operand_scales.hpp"

#include <stdexcept>

#include "kernels/formats/float_formats.hpp"

namespace fp8lab::train {
namespace {

std::string key_of(const std::string& layer, GemmKind kind, char which) {
  return layer + " " + gemm_kind_name(kind) + " " + which;
}

template <class F>
void encode_all(std::span<const float> x, float scale, std::vector<std::uint8_t>& codes) {
  for (std::size_t i = 0; i < x.size(); ++i) codes[i] = static_cast<std::uint8_t>(encode<F>(x[i] * scale, Saturation::satfinite));
}

}  // namespace

DelayedOperand& DelayedOperandScales::operand(const std::string& layer, GemmKind kind, char which,
                                              const GemmPrecision& p) {
  const std::string key = key_of(layer, kind, which);
  for (DelayedOperand& o : operands_)
    if (o.key == key) return o;
  const Fp8Format format = (which == 'a' ? p.a_format : p.b_format).fp8();  // validate() refused the others
  operands_.push_back({key, DelayedScaler({format, p.amax_history, p.amax_reduction, p.margin}), 0});
  return operands_.back();
}

void DelayedOperandScales::roll() {
  for (DelayedOperand& o : operands_) {
    o.scaler.update(float_from_bits(o.step_amax_bits));
    o.step_amax_bits = 0;
  }
}

void DelayedOperandScales::restore(const std::string& key, const DelayedScalingConfig& config,
                                   std::span<const float> history, float scale) {
  for (const DelayedOperand& o : operands_)
    if (o.key == key) throw std::invalid_argument("delayed scaling: operand '" + key + "' restored twice");
  operands_.push_back({key, DelayedScaler(config, history, scale), 0});
}

QuantizedTensor quantize_delayed(std::span<const float> x, std::int64_t rows, std::int64_t cols, Fp8Format format,
                                 DelayedOperand& operand) {
  QuantizedTensor q = make_quantized_tensor(rows, cols, {format, Granularity::tensor(), ScaleRule::fp32});
  const float scale = operand.scaler.scale();
  q.scales[0] = operand.scaler.scale_inverse();
  if (format == Fp8Format::e4m3)
    encode_all<E4M3>(x, scale, q.codes);
  else
    encode_all<E5M2>(x, scale, q.codes);
  // |x| compared as bit patterns: finite values and inf order as floats do, NaN is the largest.
  std::uint32_t amax = operand.step_amax_bits;
  for (const float v : x) amax = std::max(amax, float_bits(v) & 0x7FFFFFFFu);
  operand.step_amax_bits = amax;
  return q;
}

}  // namespace fp8lab::train
