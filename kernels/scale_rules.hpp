#pragma once
// Scale rules: how one tile's scale comes from its amax, and how the elements are scaled
// before the element codec. One quantizer serves every rule; a rule is data (ScaleRuleMath:
// which amax -> scale arithmetic, and whether q is formed by a multiply or a division), and
// the arithmetic below is host+device code, so the CPU and CUDA backends agree by
// construction. Each rule reproduces one library's own FP32 arithmetic, bit for bit; the
// source is named at each rule (formulas: ../shared/FACTS.md "Blackwell formats and library
// scale rules"; an independent FP64 reference: reference/scale_rules_ref).
//
// Vocabulary. A tile's result is a TileScale:
//   decode  the scale stored per tile (QuantizedTensor::scales, `--scales`): x ~ q * decode
//           (for the two-level nvfp4 rules x ~ q * fl32(decode * tensor decode scale));
//   encode  the factor the elements are scaled with: scaled = fl32(x * encode) for
//           ApplyScale::multiply, fl32(x / encode) for ApplyScale::divide;
// then q = element codec, round to nearest even, saturating to the largest finite value.
// fmt_max is the element format's largest finite value (448, 57344, 6, 28, 7.5); emax_elem
// the exponent of its largest normal (8, 15, 2, 4, 2: OCP MX v1.0 table 1 / FACTS.md).
#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/formats/element_format.hpp"
#include "kernels/formats/float_formats.hpp"
#include "kernels/formats/host_device.hpp"
#include "kernels/formats/ue8m0.hpp"

namespace fp8lab {

enum class ScaleRule : std::uint8_t {
  fp32,           // `fp32`: sf = fl32(amax / fmt_max); q = x * fl32(1 / sf). fp8lab's rule (DESIGN.md 2).
  pow2,           // `pow2`: that sf rounded up to a power of two (DeepGEMM ceil_to_ue8m0).
  deepgemm,       // `deepgemm`: DeepGEMM's per-token/per-block casts.
  te,             // `te`: Transformer Engine current / blockwise scaling, FP32 scale.
  te_pow2,        // `te-pow2`: the same with the scale's mantissa masked (TE's blockwise default).
  div,            // `div`: sf as fp32, q = x / sf (true division).
  mx,             // `mx`: OCP MX v1.0 FLOOR = torchao FLOOR, E8M0 scale.
  mx_ceil,        // `mx:ceil`: torchao CEIL.
  mx_even,        // `mx:even`: torchao EVEN.
  mx_rceil,       // `mx:rceil`: torchao RCEIL = TE MXFP8 (cvt.rp ue8m0).
  nvfp4,          // `nvfp4`: TE NVFP4, two levels (per-tensor FP32, per-block E4M3).
  nvfp4_torchao,  // `nvfp4:torchao`: torchao NVFP4 two-level scaling.
  nvfp4_4over6,   // `nvfp4:4over6`: TE NVFP4 "4over6", per block the better of two scales (kernels/nvfp4_4over6.hpp).
};

enum class ScaleFromAmax : std::uint8_t {
  ratio,             // fp32, div
  ratio_ceil_pow2,   // pow2
  ratio_amax_floor,  // deepgemm
  te,                // te
  te_pow2,           // te-pow2
  e8m0_floor,        // mx
  e8m0_ceil,         // mx:ceil
  e8m0_even,         // mx:even
  e8m0_rceil,        // mx:rceil
  nvfp4_te,          // nvfp4
  nvfp4_torchao,     // nvfp4:torchao
  nvfp4_4over6,      // nvfp4:4over6 (the map-to-6 candidate here; the choice needs the elements)
};

enum class ApplyScale : std::uint8_t { multiply, divide };

// A rule as the kernels see it: plain data, passed by value into device code.
struct ScaleRuleMath {
  ScaleFromAmax scale_from;
  ApplyScale apply;
  bool two_level;  // needs the tensor's amax before any tile (nvfp4 rules)
};

FP8LAB_HD constexpr ScaleRuleMath scale_rule_math(ScaleRule rule) {
  switch (rule) {
    case ScaleRule::fp32: return {ScaleFromAmax::ratio, ApplyScale::multiply, false};
    case ScaleRule::pow2: return {ScaleFromAmax::ratio_ceil_pow2, ApplyScale::multiply, false};
    case ScaleRule::deepgemm: return {ScaleFromAmax::ratio_amax_floor, ApplyScale::multiply, false};
    case ScaleRule::te: return {ScaleFromAmax::te, ApplyScale::multiply, false};
    case ScaleRule::te_pow2: return {ScaleFromAmax::te_pow2, ApplyScale::multiply, false};
    case ScaleRule::div: return {ScaleFromAmax::ratio, ApplyScale::divide, false};
    case ScaleRule::mx: return {ScaleFromAmax::e8m0_floor, ApplyScale::multiply, false};
    case ScaleRule::mx_ceil: return {ScaleFromAmax::e8m0_ceil, ApplyScale::multiply, false};
    case ScaleRule::mx_even: return {ScaleFromAmax::e8m0_even, ApplyScale::multiply, false};
    case ScaleRule::mx_rceil: return {ScaleFromAmax::e8m0_rceil, ApplyScale::multiply, false};
    case ScaleRule::nvfp4: return {ScaleFromAmax::nvfp4_te, ApplyScale::multiply, true};
    case ScaleRule::nvfp4_torchao: return {ScaleFromAmax::nvfp4_torchao, ApplyScale::multiply, true};
    case ScaleRule::nvfp4_4over6: return {ScaleFromAmax::nvfp4_4over6, ApplyScale::multiply, true};
  }
  return {ScaleFromAmax::ratio, ApplyScale::multiply, false};
}

struct TileScale {
  float decode;
  float encode;
};

// The per-tensor level of the two-level rules (1, 1 for every other rule).
struct TensorScale {
  float encode = 1.0f;  // TE's S_enc; torchao: fl32(1 / per_tensor_scale), reported only
  float decode = 1.0f;  // the per-tensor factor of the dequantization: x ~ q * fl32(s_b * decode)
};

namespace scale_detail {

inline constexpr float kFltMax = 0x1.fffffep127f;
FP8LAB_HD constexpr bool is_nan_or_inf(float v) { return (float_bits(v) & 0x7FFFFFFFu) >= 0x7F800000u; }
// fminf(v, FLT_MAX) for v >= 0 or NaN, as CUDA's fminf: a NaN gives FLT_MAX (the NaN loses).
FP8LAB_HD constexpr float min_flt_max(float v) { return v <= kFltMax ? v : kFltMax; }

// fp32 / pow2 / div (DESIGN.md section 2): an all-zero tile gets 1; sf = fl32(amax / fmt_max),
// rounded up to a power of two for pow2; fp8lab keeps sf >= 2^-126 (FLT_MIN) so that
// fl32(1 / sf) stays finite (only amax below fmt_max * 2^-126 is affected). A NaN amax gives a
// NaN sf; an inf amax an inf sf (so fl32(1 / sf) = 0 and inf * 0 = NaN: kernels propagate).
FP8LAB_HD constexpr float ratio_scale(float amax, float format_max, bool round_up_pow2) {
  if (amax == 0.0f) return 1.0f;
  float sf = amax / format_max;
  // sf = 0 (amax below fmt_max * 2^-150 underflows) is not a UE8M0 value (ceil_pow2 would give
  // its NaN): it goes straight to the 2^-126 floor as under fp32.
  if (round_up_pow2 && sf > 0.0f) sf = ceil_pow2(sf);
  constexpr float kMinScale = 0x1p-126f;
  return sf < kMinScale ? kMinScale : sf;  // written so that a NaN sf passes through
}

// DeepGEMM (deep_gemm/utils/math.py per_token_cast_to_fp8 / per_block_cast_to_fp8):
// amax.clamp(1e-4); sf = amax / 448; x * (1.0 / sf). The clamp is FP32 1e-4 (torch converts the
// bound to the tensor's dtype); no zero-tile special case (a zero tile gets sf = fl32(1e-4) /
// fmt_max); NaN passes through torch.clamp, so NaN amax gives NaN sf; inf gives inf.
inline constexpr float kDeepGemmAmaxFloor = 1e-4f;
FP8LAB_HD constexpr TileScale deepgemm_scale(float amax, float format_max) {
  const float clamped = amax < kDeepGemmAmaxFloor ? kDeepGemmAmaxFloor : amax;
  const float sf = clamped / format_max;
  return {sf, 1.0f / sf};
}

// Transformer Engine (common/recipe/recipe_common.cuh compute_scale_from_amax, epsilon 0):
// amax 0 or inf -> scale 1; scale = fl32(fmt_max / amax) (__fdiv_rn); an inf scale (amax too
// small) -> FLT_MAX; a NaN scale (NaN amax) -> 1; pow2: scale bits & 0xFF800000 (the mantissa
// masked: the power of two at or below). q = x * scale; the stored scale_inv = fl32(1 / scale).
FP8LAB_HD constexpr TileScale te_scale(float amax, float format_max, bool mask_to_pow2) {
  float scale = 1.0f;
  if (amax != 0.0f && !(amax > kFltMax)) {  // NaN goes on and is caught below
    scale = format_max / amax;
    if (scale > kFltMax) scale = kFltMax;
    if (scale != scale) scale = 1.0f;
  }
  if (mask_to_pow2) scale = float_from_bits(float_bits(scale) & 0xFF800000u);
  return {1.0f / scale, scale};
}

// The E8M0 byte of an MX block scale X = 2^(byte - 127).
// Zero amax -> byte 0 (X = 2^-127), as torchao (exponent field 0 gives -127 - emax_elem, clamped),
// microxcaling (FP32_MIN_NORMAL added to a zero amax, then clamped) and TE (0 -> 0x00).
// NaN amax -> 0xFF (NaN scale), as torchao for all four modes. An inf amax -> 0xFF too, as
// microxcaling (log2 inf = inf exponent above 127 -> NaN): fp8lab's choice, so that an
// overflowed block stays visible. torchao 0.18 gives an inf block byte 247 (E4M3; the exponent
// field's clamp) under FLOOR, CEIL and EVEN and 0xFE under RCEIL, as TE's MXFP8
// (cvt.rp.satfinite.ue8m0x2) does, its elements then +-448. The CLI refuses inf input, so only
// the engine's overflowed gradients reach this. Exponents are clamped to [-127, 127] (torchao
// clamps to [-127, 128], 128 only reachable by non-finite amax, which is handled first); no
// finite amax reaches 127 (at most 128 - emax_elem).
//  floor  2^(floor(log2 amax) - emax_elem): OCP MX v1.0 sec. 6.3; torchao FLOOR (exponent field
//         of amax). microxcaling's fp32 log2 can round up just below 2^k: not followed.
//  ceil   floor + 1 when amax is not a power of two (torchao CEIL).
//  even   torchao EVEN: amax's significand rounded to the element's mantissa width by adding
//         half an ULP of that width to the bit pattern (ties away from zero), then floor.
//  rceil  TE MXFP8 (cvt.rp.satfinite.ue8m0x2) = torchao RCEIL on Blackwell (_to_mx_rceil's
//         inline PTX): d = fl32(amax * fl32(1 / fmt_max)), rounded up to a power of two (a
//         subnormal d rounds up only when > 2^-127). torchao's eager fallback computes
//         ceil(log2(amax / fmt_max)) with an FP32 log2 that rounds a d just above 2^k down to k:
//         one byte lower than cvt.rp for such blocks (tests/peers/block_scaled_quantizers_test.py
//         counts them apart; none in random data).
FP8LAB_HD constexpr std::uint8_t mx_scale_code(float amax, ScaleFromAmax mode, ElementTraits f) {
  const std::uint32_t bits = float_bits(amax) & 0x7FFFFFFFu;
  if (bits >= 0x7F800000u) return kUe8m0Nan;
  if (bits == 0) return 0x00;
  if (mode == ScaleFromAmax::e8m0_rceil) {
    const float d = amax * (1.0f / f.max_finite);
    return d == 0.0f ? 0x00 : ue8m0_encode_ceil(d);  // d <= 2^126 here: never the saturated 0xFE
  }
  std::uint32_t rounded = bits;
  if (mode == ScaleFromAmax::e8m0_even) rounded = (bits + (1u << (22 - f.mantissa_bits))) & 0xFF800000u;
  int exponent = static_cast<int>(rounded >> 23) - 127 - f.emax;
  if (mode == ScaleFromAmax::e8m0_ceil && (bits & 0x7FFFFFu) != 0) exponent += 1;
  exponent = exponent < -127 ? -127 : (exponent > 127 ? 127 : exponent);
  return static_cast<std::uint8_t>(exponent + 127);
}

// The elements are scaled by 1 / X, exact, except for byte 0 (X = 2^-127, an FP32 subnormal),
// where each library has its own factor and none uses 2^127 (checked against torchao 0.18 in
// tests/peers/block_scaled_quantizers_test.py):
//  floor, ceil, even  2^126: torchao clamps the divisor to FP32's smallest normal (a Triton
//                     workaround in to_mx), x / max(X, 2^-126);
//  rceil              1: TE's exp2f_rcp (ptx.cuh) and torchao's _to_mx_rceil return 1 for byte 0.
// The stored scale stays 2^-127 (what the hardware decodes), so such a block's round trip is
// off by 2 (floor, ceil, even) or flushes its values to 0 (rceil), as it is in those libraries.
// Byte 0 with a nonzero amax needs amax below 2^(emax_elem - 126) (2^-118 for E4M3).
FP8LAB_HD constexpr TileScale mx_scale(float amax, ScaleFromAmax mode, ElementTraits f) {
  const std::uint8_t code = mx_scale_code(amax, mode, f);
  if (code == kUe8m0Nan) return {ue8m0_decode(code), ue8m0_decode(code)};
  if (code == 0) return {ue8m0_decode(code), mode == ScaleFromAmax::e8m0_rceil ? 1.0f : 0x1p126f};
  return {ue8m0_decode(code), exact_pow2(127 - static_cast<int>(code))};
}

// TE NVFP4 block (common/cast/nvfp4/core_nvfp4.cuh): s_b = E4M3_satfinite(fminf(block_amax *
// fl32(S_enc * fl32(1/6)), FLT_MAX)); enc = fminf(fl32(1 / fl32(s_b * fl32(1 / S_enc))), FLT_MAX);
// q = E2M1(fl32(x * enc)) (the codec saturates to +-6, as the clamp). A block whose s_b rounds
// to 0 gets enc = FLT_MAX (1 / 0 = inf, capped), as TE: its codes saturate and decode to 0.
// In two steps so that a vectorized quantizer can take the first for 8 blocks at once with the
// factor computed once (kernels/cpu/quantize_rows_avx2.cpp): the factor, then s_b (E4M3 rounding).
FP8LAB_HD constexpr float nvfp4_te_block_encode(ElementTraits f, TensorScale t) {
  return t.encode * (1.0f / f.max_finite);
}
FP8LAB_HD constexpr TileScale nvfp4_te_scale(float amax, ElementTraits f, TensorScale t) {
  const float s_b = decode<E4M3>(encode_e4m3_satfinite(min_flt_max(amax * nvfp4_te_block_encode(f, t))));
  return {s_b, min_flt_max(1.0f / (s_b * t.decode))};
}

// torchao NVFP4 (prototype/mx_formats/nvfp4_tensor.py nvfp4_quantize, two-level, torchao 0.18):
// block_scale = fl32(block_amax / 6); s = fl32(block_scale / per_tensor_scale) clamped to
// [2^-6, 448] (E4M3's smallest normal and max; NaN passes torch.clamp) and cast to E4M3 (RN);
// q = E2M1(clamp(fl32(x * fl32(fl32(1 / per_tensor_scale) / s_b)), +-6)) (a multiply by the
// reciprocal of the combined scale, "to match the MSLK triton kernel"; torchao before 0.18
// divided by fl32(per_tensor_scale * s_b), which rounds some ties the other way).
FP8LAB_HD constexpr TileScale nvfp4_torchao_scale(float amax, ElementTraits f, TensorScale t) {
  const float block_scale = amax / f.max_finite;
  // fp8lab's choice: an all-zero block under a per-tensor scale of 0 (see tensor_scale) gets
  // s = 0, so the clamp gives 2^-6, where torchao's 0 / 0 gives a NaN block scale. (For any
  // other per-tensor scale, NaN included, this is torchao's own quotient.)
  float s = block_scale == 0.0f && t.decode == 0.0f ? 0.0f : block_scale / t.decode;
  s = s < 0x1p-6f ? 0x1p-6f : (s > 448.0f ? 448.0f : s);
  const float s_b = decode<E4M3>(encode_e4m3_satfinite(s));
  return {s_b, t.encode / s_b};
}

// TE NVFP4 4over6 (common/cast/nvfp4/quantize_4over6_nvfp4.cuh compute_scale_pair): the two
// candidate block scales, map-to-4 and map-to-6, from base = fl32(fl32(amax / 6) * S_enc):
// s = E4M3(fminf(base * {1.5, 1}, 448)), enc = fminf(fl32(1 / fl32(s * fl32(1 / S_enc))), FLT_MAX).
struct FourOverSixCandidates {
  TileScale map4, map6;
};
FP8LAB_HD constexpr float e4m3_block_scale(float v) {
  return decode<E4M3>(encode_e4m3_satfinite(v <= 448.0f ? v : 448.0f));  // fminf(v, 448): a NaN gives 448
}
FP8LAB_HD constexpr FourOverSixCandidates nvfp4_4over6_candidates(float amax, ElementTraits f, TensorScale t) {
  const float base = (amax / f.max_finite) * t.encode;
  const float s4 = e4m3_block_scale(base * 1.5f), s6 = e4m3_block_scale(base);
  return {{s4, min_flt_max(1.0f / (s4 * t.decode))}, {s6, min_flt_max(1.0f / (s6 * t.decode))}};
}

}  // namespace scale_detail

// The per-tensor level of a two-level rule from the tensor's amax (for others {1, 1}).
// nvfp4 (TE compute_global_encode_scaling_factor_FP4): S_enc = fminf(fl32(448 * 6 / amax), FLT_MAX),
//   1 when amax = 0 or S_enc = 0 (inf amax); the decode factor is fl32(1 / S_enc). A NaN amax
//   gives FLT_MAX (fminf drops the NaN), as TE. nvfp4:4over6 the same with 256 * 6 (TE's 4over6
//   default E4M3 bound 256, leaving the map-to-4 scale its 1.5x of headroom).
// nvfp4:torchao (per_tensor_amax_to_scale): per_tensor_scale = fl32(amax / (448 * 6)); the encode
//   factor is fl32(1 / per_tensor_scale). fp8lab's choice: an all-zero tensor gets 1 (torchao's
//   is 0, and its 1 / 0 makes every code NaN-derived). A tensor with amax below about
//   2688 * 2^-122 (5e-34) is quantized as torchao does, factors that overflow to inf included:
//   in a block whose factor overflows, nonzero elements saturate to +-6 and zero elements give
//   0 * inf = NaN, which fp8lab's E2M1 encodes as -0 (float_formats.hpp) where torchao's cast
//   gives a nonzero code (-1.5 or -2); an amax below 2688 * 2^-150 makes the per-tensor scale
//   0 (every block decodes to 0, as in torchao; nvfp4_torchao_scale keeps the all-zero blocks'
//   scales finite).
FP8LAB_HD constexpr TensorScale tensor_scale(float tensor_amax, ScaleRule rule, ElementTraits f) {
  const ScaleFromAmax from = scale_rule_math(rule).scale_from;
  // E4M3 block-scale bound x element max: 2688 for E2M1 (1536 under 4over6)
  const float levels = (from == ScaleFromAmax::nvfp4_4over6 ? 256.0f : 448.0f) * f.max_finite;
  if (from == ScaleFromAmax::nvfp4_te || from == ScaleFromAmax::nvfp4_4over6) {
    float s_enc = scale_detail::min_flt_max(levels / tensor_amax);
    if (tensor_amax == 0.0f || s_enc == 0.0f) s_enc = 1.0f;
    return {s_enc, 1.0f / s_enc};
  }
  if (from == ScaleFromAmax::nvfp4_torchao) {
    const float per_tensor = tensor_amax == 0.0f ? 1.0f : tensor_amax / levels;
    return {1.0f / per_tensor, per_tensor};
  }
  return {};
}

// One tile's scale from its amax (max |x| over the tile, padding counting as 0).
FP8LAB_HD constexpr TileScale tile_scale(float amax, ScaleRule rule, ElementTraits f, TensorScale t = {}) {
  using namespace scale_detail;
  switch (const ScaleFromAmax from = scale_rule_math(rule).scale_from) {
    case ScaleFromAmax::ratio:
    case ScaleFromAmax::ratio_ceil_pow2: {
      const float sf = ratio_scale(amax, f.max_finite, from == ScaleFromAmax::ratio_ceil_pow2);
      return {sf, scale_rule_math(rule).apply == ApplyScale::divide ? sf : 1.0f / sf};
    }
    case ScaleFromAmax::ratio_amax_floor: return deepgemm_scale(amax, f.max_finite);
    case ScaleFromAmax::te: return te_scale(amax, f.max_finite, false);
    case ScaleFromAmax::te_pow2: return te_scale(amax, f.max_finite, true);
    case ScaleFromAmax::e8m0_floor:
    case ScaleFromAmax::e8m0_ceil:
    case ScaleFromAmax::e8m0_even:
    case ScaleFromAmax::e8m0_rceil: return mx_scale(amax, from, f);
    case ScaleFromAmax::nvfp4_te: return nvfp4_te_scale(amax, f, t);
    case ScaleFromAmax::nvfp4_torchao: return nvfp4_torchao_scale(amax, f, t);
    case ScaleFromAmax::nvfp4_4over6: return nvfp4_4over6_candidates(amax, f, t).map6;
  }
  return {1.0f, 1.0f};
}

// The value an element is encoded from: fl32(x * encode) or fl32(x / encode).
FP8LAB_HD constexpr float scaled_element(float x, float encode, ApplyScale apply) {
  return apply == ApplyScale::divide ? x / encode : x * encode;
}

// Spot checks against FACTS.md's worked case (pytorch/ao#2035): amax 150, E4M3: RCEIL byte 126,
// OCP-style ceil byte 127, FLOOR byte 127 - 1 = 126 (floor(log2 150) = 7, 7 - 8 = -1).
static_assert(scale_detail::mx_scale_code(150.0f, ScaleFromAmax::e8m0_rceil, element_traits_of<E4M3>()) == 126);
static_assert(scale_detail::mx_scale_code(150.0f, ScaleFromAmax::e8m0_ceil, element_traits_of<E4M3>()) == 127);
static_assert(scale_detail::mx_scale_code(150.0f, ScaleFromAmax::e8m0_floor, element_traits_of<E4M3>()) == 126);

// Names, in the spelling of --scale / scale = / scale=: "fp32", "pow2", "deepgemm", "te",
// "te-pow2", "div", "mx", "mx:ceil", "mx:even", "mx:rceil", "nvfp4", "nvfp4:torchao", "nvfp4:4over6".
const char* scale_rule_name(ScaleRule rule);
// Throws std::invalid_argument listing the valid names.
ScaleRule parse_scale_rule(std::string_view text);
// parse_scale_rule for GEMM operands (specs, `fp8lab gemm`, training recipes): the FP8 GEMMs
// take one scale per tile, so the two-level nvfp4 rules are refused here, with the reason.
ScaleRule parse_gemm_scale_rule(std::string_view text);
// "fp32, pow2, ..." for error messages and --help.
std::string scale_rule_names();
// Throws std::invalid_argument when the rule cannot serve the format (the nvfp4 rules take
// E2M1 only: their block scale is an E4M3 sized for E2M1's 6); every other pair is served.
void check_rule_serves_format(ScaleRule rule, ElementFormat format);
// Throws std::invalid_argument when the rule cannot take this tile shape (tile_rows x tile_cols)
// or rounding: nvfp4:4over6 takes TE's 1x16 and 16x16 blocks only, and nearest rounding only
// (TE refuses stochastic rounding with 4over6). Every other rule takes every tile and rounding.
void check_rule_serves_tiles(ScaleRule rule, std::int64_t tile_rows, std::int64_t tile_cols, bool stochastic);

}  // namespace fp8lab
