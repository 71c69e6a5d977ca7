#pragma once
// What an FP8 GEMM computes, shared by every backend (DESIGN.md section 2):
//   C[M, N] = A[M, K] * B[N, K]^T   (NT, both operands K-major, as DeepGEMM)
// on FP8 codes with one scale per tile/block. Every N_C elements of K the partial p (an
// accumulation of unscaled code products, started from 0) is promoted on the CUDA cores:
//   s = fl32(s_a * s_b);  acc = fma32(p, s, acc);  output = acc (FP32) or RNE(acc) (BF16).
// How p is accumulated is the accumulation model:
//   hopper                     = bits:13,depth:32,round:rz (Khattak & Mikaitis 2025; MMA-Sim)
//   bits:F,depth:D,round:rz|rne  one fused D-term step per instruction: align every term to the
//                                largest unnormalized exponent E, keep F fraction bits of each
//                                (truncated or rounded), sum exactly, normalize the sum to F bits
//   fp32                       = p = fma32(a_k, b_k, p) for k in order (ideal promotion baseline)
//   b200                       Blackwell's block-scaled MMA (kernels/block_scaled_mma.hpp): the
//                              block scales enter the instruction and the FP32 accumulator runs
//                              over all of K, so its promotion is `never`; the instruction kind
//                              (mxf8f6f4, mxf4nvf4) follows from the operands' formats and scales
// The fused models take an optional ",zero:none|min": the exponent an FP8 zero gets in the
// alignment step (DESIGN.md section 2, "open corner"), a question Hopper silicon decides:
//   none (default) a zero operand has exponent -126 (MMA-Sim, Xie et al. 2025, whose probes
//                  give zero an exponent below any normal): a product with a zero factor
//                  never raises E above a nonzero product's exponent
//   min            a zero is treated like a subnormal, exponent emin (-6 E4M3, -14 E5M2):
//                  0 x 448 raises E and truncates the other terms of its instruction
#include <cstdint>
#include <string>
#include <string_view>

#include "kernels/quantization.hpp"

namespace fp8lab {

struct AccumulationModel {
  enum class Kind { fused, fp32, block_scaled };
  enum class Rounding { rz, rne };
  enum class ZeroExponent { none, min };
  Kind kind = Kind::fused;
  int fraction_bits = 13;  // F
  int depth = 32;          // D, products per instruction (wgmma FP8: k = 32)
  Rounding rounding = Rounding::rz;
  ZeroExponent zero_exponent = ZeroExponent::none;  // fused models only

  static AccumulationModel hopper() { return {}; }
  static AccumulationModel fp32() { return {Kind::fp32, 23, 32, Rounding::rne, ZeroExponent::none}; }
  // F and depth are the instruction kind's (kernels/block_scaled_mma.hpp), not these fields.
  static AccumulationModel b200() { return {Kind::block_scaled, 25, 32, Rounding::rz, ZeroExponent::none}; }
  // The promotion interval a GEMM with this model takes when none is given: never for b200
  // (its accumulator stays in the tensor core), 128 (DeepSeek-V3's N_C) otherwise.
  const char* default_promotion() const { return kind == Kind::block_scaled ? "never" : "128"; }
  // "hopper", "fp32", "b200" or "bits:F,depth:D,round:rz|rne", the fused ones optionally followed by
  // ",zero:none|min" (e.g. "hopper,zero:min"); throws std::invalid_argument saying why.
  static AccumulationModel parse(std::string_view text);
  std::string to_string() const;
  bool operator==(const AccumulationModel&) const = default;

 private:
  static AccumulationModel parse_without_zero(std::string_view text);
};

// Promotion every `elements` of K, or never (one partial over all of K).
struct PromotionInterval {
  std::int64_t elements = 128;
  bool never = false;
  static PromotionInterval parse(std::string_view text);  // "128", "never"
  std::string to_string() const;
};

enum class OutputType { fp32, bf16 };
OutputType parse_output_type(std::string_view text);
const char* output_type_name(OutputType t);

struct GemmConfig {
  AccumulationModel accumulation;
  PromotionInterval promotion;
  OutputType output = OutputType::fp32;
};

// The geometry a valid GEMM runs with.
struct GemmPlan {
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t padded_k = 0;  // K rounded up to a multiple of the instruction depth (32)
  std::int64_t interval = 0;  // N_C in elements (= padded_k for never)
  std::int64_t intervals = 0;
};

// Checks a, b and the config against each other and returns the plan; throws
// std::invalid_argument with the reason: mismatched K, a promotion interval that
// is no multiple of the instruction depth, or one that does not divide a scale's extent
// along K (the scale would change inside one partial). The operands' formats may differ
// (E4M3 x E5M2 or E5M2 x E4M3, Transformer Engine's HYBRID backward): each is decoded with
// its own format, as Hopper's wgmma does for every e4m3/e5m2 pairing. Under b200 the operands
// may be any element format with hardware block scales (block_scaled_mma_for says which), the
// promotion must be never, and K is padded to the instruction's depth (32 or 64).
GemmPlan plan_gemm(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& config);

}  // namespace fp8lab
