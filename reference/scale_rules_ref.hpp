#pragma once
// FP64 reference for every scale rule of the quantizer (kernels/scale_rules.hpp), written from
// the rules' formulas (../shared/FACTS.md "Blackwell formats and library scale rules") with
// frexp/ldexp and FP64 arithmetic rounded to FP32 where the library rounds to FP32: no bit
// patterns and no code shared with kernels/.
//
// fl32(a op b) for FP32 values a, b is computed as the FP32 rounding of the FP64 result:
// - a * b: the FP64 product of two 24-bit significands is exact, so one rounding.
// - a / b: rounding twice (to FP64, then FP32) is safe. For 24-bit integer significands A, B the
//   quotient A / B is never an FP32 midpoint M 2^k (M odd with 25 bits): A 2^j = B M would need
//   the odd M to divide A, but M > A. And it lies at least 1 / (B M) >= 2^-49 (relative) from
//   every midpoint, while the FP64 rounding moves it by at most 2^-53: it cannot cross one.
//   (In the FP32 subnormal range midpoints have fewer bits, which only widens the gap, and an
//   exact midpoint is then exact in FP64 too.)
#include <string>

#include "reference/float_formats_ref.hpp"

namespace fp8lab::ref {

// fl32(v): v rounded once to FP32, returned as FP64. The FP32 value passes through a volatile:
// GCC 12.2 at -O2 (its SLP vectorizer) drops a plain static_cast<double>(static_cast<float>(v))
// round trip when it packs two such results into one vector register (seen here: returning
// {fl32(1 / p), p} gave both unrounded), so the reference must not leave it to the optimizer.
double fl32(double v);

enum class ScaleRuleRef {
  fp32, pow2, deepgemm, te, te_pow2, div,
  mx_floor, mx_ceil, mx_even, mx_rceil,
  nvfp4_te, nvfp4_torchao,
  nvfp4_4over6,  // tile_scale_ref gives its map-to-6 candidate; the choice: reference/nvfp4_4over6_ref
};

// The rule named as on the command line ("fp32", "te-pow2", "mx:rceil", "nvfp4:torchao", ...);
// throws std::invalid_argument for any other text.
ScaleRuleRef scale_rule_ref_named(const std::string& name);

struct TileScaleRef {
  double decode;  // the stored per-tile scale (FP32 value): x ~ q * decode (* tensor decode)
  double encode;  // the element factor: q = RNE(fl32(x * encode)) or RNE(fl32(x / encode))
  bool divide;
};

struct TensorScaleRef {
  double encode = 1.0;  // TE's S_enc (nvfp4), torchao's fl32(1 / per_tensor_scale); 1 for one-level rules
  double decode = 1.0;  // the per-tensor dequantization factor
};

// The per-tensor level of the two-level rules from the tensor's amax ({1, 1} otherwise).
TensorScaleRef tensor_scale_ref(double tensor_amax, ScaleRuleRef rule, const FormatDefinition& element);

// A tile's scale from its amax (an FP32 value, max |x| over the tile).
TileScaleRef tile_scale_ref(double amax, ScaleRuleRef rule, const FormatDefinition& element,
                            const TensorScaleRef& tensor = {});

// nvfp4:4over6's candidate block scale (TE quantize_4over6_nvfp4.cuh): base = fl32(fl32(amax / 6)
// * S_enc); s = E4M3(min(base (map to 6) or fl32(1.5 base) (map to 4), 448)); encode =
// min(fl32(1 / fl32(s * S_dec)), FLT_MAX), FLT_MAX when s * S_dec is 0.
TileScaleRef nvfp4_4over6_candidate_ref(double amax, const FormatDefinition& element, const TensorScaleRef& tensor,
                                        bool map_to_4);

// The E8M0 exponent e of an MX rule's scale 2^e, in [-127, 127]; the rule's choices for zero
// amax (-127) are applied here; a NaN or infinite amax has no exponent (the scale is NaN).
int mx_exponent_ref(double amax, ScaleRuleRef rule, const FormatDefinition& element);

}  // namespace fp8lab::ref
