#include "reference/scale_rules_ref.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace fp8lab::ref {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kFltMax = std::ldexp(2.0 - std::ldexp(1.0, -23), 127);

// The exponent of the largest normal of the element format (OCP MX emax_elem): 8, 15, 2, 4, 2.
int emax_of(const FormatDefinition& f) {
  int k = 0;
  std::frexp(f.max_finite, &k);  // max = m 2^k, m in [0.5, 1)
  return k - 1;
}

// floor(log2 v) and ceil(log2 v) for v > 0.
int floor_log2(double v) {
  int k = 0;
  std::frexp(v, &k);
  return k - 1;
}
int ceil_log2(double v) {
  int k = 0;
  const double m = std::frexp(v, &k);
  return m == 0.5 ? k - 1 : k;
}

double round_e4m3(double v) { return round_to_format(v, e4m3(), /*saturate=*/true); }

TileScaleRef ratio_rule(double amax, const FormatDefinition& f, bool pow2, bool divide) {
  double sf = amax == 0.0 ? 1.0 : fl32(amax / f.max_finite);
  if (pow2 && sf > 0.0 && std::isfinite(sf)) sf = std::ldexp(1.0, ceil_log2(sf));  // sf = 0: the floor below
  sf = std::max(sf, std::ldexp(1.0, -126));  // NaN stays NaN (std::max returns its first argument)
  return {sf, divide ? sf : fl32(1.0 / sf), divide};
}

TileScaleRef deepgemm_rule(double amax, const FormatDefinition& f) {
  const double floor = fl32(1e-4);
  const double clamped = amax < floor ? floor : amax;  // torch.clamp keeps NaN
  const double sf = fl32(clamped / f.max_finite);
  return {sf, fl32(1.0 / sf), false};
}

TileScaleRef te_rule(double amax, const FormatDefinition& f, bool pow2) {
  double scale = 1.0;
  if (amax != 0.0 && std::isfinite(amax)) scale = std::min(fl32(f.max_finite / amax), kFltMax);
  if (pow2) scale = std::ldexp(1.0, floor_log2(scale));  // the power of two at or below
  return {fl32(1.0 / scale), scale, false};
}

TileScaleRef mx_rule(double amax, ScaleRuleRef rule, const FormatDefinition& f) {
  if (!std::isfinite(amax)) return {kNaN, kNaN, false};
  const int e = mx_exponent_ref(amax, rule, f);
  // The smallest scale, 2^-127, is not inverted: torchao's FLOOR, CEIL and EVEN divide by
  // FP32's smallest normal 2^-126 instead, TE's and torchao's RCEIL multiply by 1.
  if (e == -127) return {std::ldexp(1.0, e), rule == ScaleRuleRef::mx_rceil ? 1.0 : std::ldexp(1.0, 126), false};
  return {std::ldexp(1.0, e), std::ldexp(1.0, -e), false};
}

TileScaleRef nvfp4_te_rule(double amax, const FormatDefinition& f, const TensorScaleRef& t) {
  const double block_encode = fl32(t.encode * fl32(1.0 / f.max_finite));
  double v = fl32(amax * block_encode);
  if (std::isnan(v) || v > kFltMax) v = kFltMax;  // fminf(v, FLT_MAX): a NaN loses to FLT_MAX
  const double s_b = round_e4m3(v);
  const double d = fl32(s_b * t.decode);
  const double enc = d == 0.0 ? kFltMax : std::min(fl32(1.0 / d), kFltMax);
  return {s_b, std::isnan(enc) ? kFltMax : enc, false};
}

TileScaleRef nvfp4_torchao_rule(double amax, const FormatDefinition& f, const TensorScaleRef& t) {
  const double block_scale = fl32(amax / f.max_finite);
  // A zero block takes the lower clamp even when the per-tensor scale is 0 (fp8lab's choice; 0 / 0)
  double s = block_scale == 0.0 && t.decode == 0.0 ? 0.0 : fl32(block_scale / t.decode);
  if (s < std::ldexp(1.0, -6)) s = std::ldexp(1.0, -6);  // torch.clamp(min=2^-6, max=448): NaN stays
  if (s > 448.0) s = 448.0;
  const double s_b = round_e4m3(s);
  return {s_b, fl32(t.encode / s_b), false};  // x * fl32(fl32(1 / per_tensor) / s_b), torchao 0.18
}

}  // namespace

TileScaleRef nvfp4_4over6_candidate_ref(double amax, const FormatDefinition& f, const TensorScaleRef& t, bool map_to_4) {
  const double base = fl32(fl32(amax / f.max_finite) * t.encode);
  double v = map_to_4 ? fl32(base * 1.5) : base;
  if (std::isnan(v) || v > 448.0) v = 448.0;  // fminf(v, 448)
  const double s = round_e4m3(v);
  const double d = fl32(s * t.decode);
  return {s, d == 0.0 ? kFltMax : std::min(fl32(1.0 / d), kFltMax), false};
}

double fl32(double v) {
  const volatile float rounded = static_cast<float>(v);
  return rounded;
}

ScaleRuleRef scale_rule_ref_named(const std::string& name) {
  if (name == "fp32") return ScaleRuleRef::fp32;
  if (name == "pow2") return ScaleRuleRef::pow2;
  if (name == "deepgemm") return ScaleRuleRef::deepgemm;
  if (name == "te") return ScaleRuleRef::te;
  if (name == "te-pow2") return ScaleRuleRef::te_pow2;
  if (name == "div") return ScaleRuleRef::div;
  if (name == "mx") return ScaleRuleRef::mx_floor;
  if (name == "mx:ceil") return ScaleRuleRef::mx_ceil;
  if (name == "mx:even") return ScaleRuleRef::mx_even;
  if (name == "mx:rceil") return ScaleRuleRef::mx_rceil;
  if (name == "nvfp4") return ScaleRuleRef::nvfp4_te;
  if (name == "nvfp4:torchao") return ScaleRuleRef::nvfp4_torchao;
  if (name == "nvfp4:4over6") return ScaleRuleRef::nvfp4_4over6;
  throw std::invalid_argument("reference: no scale rule named '" + name + "'");
}

int mx_exponent_ref(double amax, ScaleRuleRef rule, const FormatDefinition& f) {
  const int emax = emax_of(f);
  int e = -127;  // zero amax: the smallest scale
  if (amax > 0.0) {
    switch (rule) {
      case ScaleRuleRef::mx_floor: e = floor_log2(amax) - emax; break;
      case ScaleRuleRef::mx_ceil: e = ceil_log2(amax) - emax; break;
      case ScaleRuleRef::mx_even: {
        // amax = s 2^k with s in [1, 2): s rounded to the element's mantissa bits, halves up.
        const int k = floor_log2(amax);
        const double steps = std::ldexp(1.0, f.mantissa_bits);
        const double s = std::floor(std::ldexp(amax, -k) * steps + 0.5) / steps;
        e = (s >= 2.0 ? k + 1 : k) - emax;
        break;
      }
      case ScaleRuleRef::mx_rceil: {
        const double d = fl32(amax * fl32(1.0 / f.max_finite));
        e = d == 0.0 ? -127 : ceil_log2(d);
        break;
      }
      default: throw std::invalid_argument("mx_exponent_ref: not an MX rule");
    }
  }
  return std::clamp(e, -127, 127);
}

TensorScaleRef tensor_scale_ref(double tensor_amax, ScaleRuleRef rule, const FormatDefinition& element) {
  // 4over6: TE's default E4M3 bound 256 instead of 448 (room for the map-to-4 scale).
  const double levels = (rule == ScaleRuleRef::nvfp4_4over6 ? 256.0 : 448.0) * element.max_finite;
  if (rule == ScaleRuleRef::nvfp4_te || rule == ScaleRuleRef::nvfp4_4over6) {
    double s_enc = std::isnan(tensor_amax) ? kFltMax : std::min(fl32(levels / tensor_amax), kFltMax);
    if (tensor_amax == 0.0 || s_enc == 0.0) s_enc = 1.0;
    return {s_enc, fl32(1.0 / s_enc)};
  }
  if (rule == ScaleRuleRef::nvfp4_torchao) {
    const double per_tensor = tensor_amax == 0.0 ? 1.0 : fl32(tensor_amax / levels);
    return {fl32(1.0 / per_tensor), per_tensor};
  }
  return {};
}

TileScaleRef tile_scale_ref(double amax, ScaleRuleRef rule, const FormatDefinition& element,
                            const TensorScaleRef& tensor) {
  switch (rule) {
    case ScaleRuleRef::fp32: return ratio_rule(amax, element, false, false);
    case ScaleRuleRef::pow2: return ratio_rule(amax, element, true, false);
    case ScaleRuleRef::div: return ratio_rule(amax, element, false, true);
    case ScaleRuleRef::deepgemm: return deepgemm_rule(amax, element);
    case ScaleRuleRef::te: return te_rule(amax, element, false);
    case ScaleRuleRef::te_pow2: return te_rule(amax, element, true);
    case ScaleRuleRef::mx_floor:
    case ScaleRuleRef::mx_ceil:
    case ScaleRuleRef::mx_even:
    case ScaleRuleRef::mx_rceil: return mx_rule(amax, rule, element);
    case ScaleRuleRef::nvfp4_te: return nvfp4_te_rule(amax, element, tensor);
    case ScaleRuleRef::nvfp4_torchao: return nvfp4_torchao_rule(amax, element, tensor);
    case ScaleRuleRef::nvfp4_4over6: return nvfp4_4over6_candidate_ref(amax, element, tensor, /*map_to_4=*/false);
  }
  throw std::invalid_argument("tile_scale_ref: unknown rule");
}

}  // namespace fp8lab::ref
