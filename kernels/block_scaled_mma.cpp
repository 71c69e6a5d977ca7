#include "kernels/block_scaled_mma.hpp"

#include <stdexcept>
#include <string>

namespace fp8lab {
namespace {

enum class ScaleClass { none, ue8m0, ue4m3 };

// Which hardware scale type a rule's scales are: powers of two fit UE8M0; the nvfp4 rules'
// block scales are E4M3 values (UE4M3: positive); FP32 scales fit neither.
ScaleClass scale_class(ScaleRule rule) {
  switch (rule) {
    case ScaleRule::pow2:
    case ScaleRule::te_pow2:
    case ScaleRule::mx:
    case ScaleRule::mx_ceil:
    case ScaleRule::mx_even:
    case ScaleRule::mx_rceil: return ScaleClass::ue8m0;
    case ScaleRule::nvfp4:
    case ScaleRule::nvfp4_torchao:
    case ScaleRule::nvfp4_4over6: return ScaleClass::ue4m3;
    case ScaleRule::fp32:
    case ScaleRule::deepgemm:
    case ScaleRule::te:
    case ScaleRule::div: break;
  }
  return ScaleClass::none;
}

bool is_te_two_level(ScaleRule rule) { return rule == ScaleRule::nvfp4 || rule == ScaleRule::nvfp4_4over6; }

}  // namespace

const char* block_scaled_kind_name(BlockScaledKind kind) {
  return kind == BlockScaledKind::mxf8f6f4 ? "mxf8f6f4" : "mxf4nvf4";
}

BlockScaledMma block_scaled_mma_for(const QuantizedTensor& a, const QuantizedTensor& b) {
  const auto operand_class = [](const char* name, const QuantizedTensor& q) {
    const ScaleClass c = scale_class(q.config.scale_rule);
    if (c == ScaleClass::none) {
      // The CUDA-core route (the promoted GEMMs) takes the FP8 formats only: offered to them alone.
      const std::string cuda_cores = q.config.format.is_fp8() ? " (FP32 scales run on the CUDA cores: --accum "
                                                                "bits:25,depth:32,round:rz with a promotion interval)"
                                                              : "";
      throw std::invalid_argument(std::string("--accum b200: ") + name + "'s scale rule " +
                                  scale_rule_name(q.config.scale_rule) +
                                  " gives FP32 scales; the block-scaled MMA takes UE8M0 scales (pow2, te-pow2, mx, "
                                  "mx:ceil, mx:even, mx:rceil) or nvfp4's E4M3 ones" + cuda_cores);
    }
    return c;
  };
  const ScaleClass ca = operand_class("A", a), cb = operand_class("B", b);
  if (ca != cb)
    throw std::invalid_argument(std::string("--accum b200: A's scale rule ") + scale_rule_name(a.config.scale_rule) +
                                " and B's " + scale_rule_name(b.config.scale_rule) +
                                " give different scale types (UE8M0 and E4M3): one instruction takes one");
  const bool both_fp4 = a.config.format == ElementFormat::Kind::e2m1 && b.config.format == ElementFormat::Kind::e2m1;
  if (ca == ScaleClass::ue4m3 && !both_fp4)
    throw std::invalid_argument("--accum b200: E4M3 (nvfp4) block scales go with E2M1 x E2M1 only (kind::mxf4nvf4)");
  const BlockScaledMma mma = !both_fp4 ? kMxf8f6f4 : ca == ScaleClass::ue4m3 ? kMxf4nvf4Ue4m3 : kMxf4nvf4Ue8m0;
  for (const auto& [name, q] : {std::pair<const char*, const QuantizedTensor*>{"A", &a}, {"B", &b}}) {
    const bool one_scale_along_k = q->scale_cols == 1;
    if (!one_scale_along_k && q->tile_cols % mma.scale_block != 0)
      throw std::invalid_argument(std::string("--accum b200: ") + name + "'s scales cover " +
                                  std::to_string(q->tile_cols) + " of K (" + q->config.granularity.to_string() +
                                  "); kind::" + block_scaled_kind_name(mma.kind) + " takes one scale per " +
                                  std::to_string(mma.scale_block) + " of K (or a multiple, repeated)");
  }
  return mma;
}

float block_scaled_alpha(const QuantizedTensor& a, const QuantizedTensor& b) {
  const bool a_two = scale_rule_math(a.config.scale_rule).two_level, b_two = scale_rule_math(b.config.scale_rule).two_level;
  if (!a_two && !b_two) return 1.0f;
  if (is_te_two_level(a.config.scale_rule) && is_te_two_level(b.config.scale_rule)) {
    const auto levels = [](const QuantizedTensor& q) {
      return (q.config.scale_rule == ScaleRule::nvfp4_4over6 ? 256.0f : 448.0f) * format_max(q.config.format);
    };
    const float factor_inv = static_cast<float>(1.0 / (static_cast<double>(levels(a)) * levels(b)));
    return (a.tensor_amax * b.tensor_amax) * factor_inv;
  }
  return a.tensor_scale.decode * b.tensor_scale.decode;
}

}  // namespace fp8lab
