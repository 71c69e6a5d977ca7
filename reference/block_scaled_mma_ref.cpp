#include "reference/block_scaled_mma_ref.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace fp8lab::ref {
namespace {

using Int = __int128;

// value = (negative ? -1 : 1) * significand * 2^lsb; `lead` is the model's exponent of the
// number: lsb + the format's fraction bits, which for a subnormal is the format's minimum
// normal exponent (the field-0 codes share it).
struct Parts {
  bool negative = false;
  Int significand = 0;
  int lsb = 0;
  int lead = 0;
};

Parts element_parts(std::uint32_t code, const FormatDefinition& f) {
  const std::uint32_t fraction = code & ((1u << f.mantissa_bits) - 1u);
  const std::uint32_t field = (code >> f.mantissa_bits) & ((1u << f.exponent_bits) - 1u);
  Parts p;
  p.negative = ((code >> (f.exponent_bits + f.mantissa_bits)) & 1u) != 0;
  p.significand = field == 0 ? fraction : fraction + (1u << f.mantissa_bits);
  p.lead = field == 0 ? f.min_exponent : f.min_exponent + static_cast<int>(field) - 1;
  p.lsb = p.lead - f.mantissa_bits;
  return p;
}

// A nonnegative FP32 value (the accumulator's magnitude, or a scale) as 24-bit significand *
// 2^lsb; FP32 subnormals have lead -126.
Parts fp32_parts(double magnitude) {
  Parts p;
  int lead = -126;
  if (magnitude >= std::ldexp(1.0, -126)) {
    std::frexp(magnitude, &lead);
    lead -= 1;
  }
  p.lead = lead;
  p.lsb = lead - 23;
  p.significand = static_cast<Int>(std::ldexp(magnitude, -p.lsb));  // exact: FP32 has 24 bits
  return p;
}

// A scale as the hardware reads it: UE8M0 = 2^x exactly (lead x, whatever the FP32 encoding);
// E4M3 with its own subnormal exponent -6.
Parts scale_parts(double scale, bool e4m3) {
  if (e4m3) return element_parts(code_of_value(scale, ref::e4m3()), ref::e4m3());
  int e = 0;
  std::frexp(scale, &e);
  return Parts{false, 1, e - 1, e - 1};
}

// |x| * 2^shift truncated toward zero (shift < 0 drops bits), sign restored. A zero term's lsb
// is whatever its factors' add to, so its shift may pass the type's width: it adds nothing.
// A nonzero term's shift is at most F + 1 (its lsb is at or below its lead, and a product's lead
// is at most one above its exponent, itself at most E).
Int shifted(Int magnitude, int shift, bool negative) {
  Int r = 0;
  if (magnitude == 0) return 0;
  if (shift >= 0)
    r = magnitude << shift;
  else if (-shift < 126)
    r = magnitude >> (-shift);
  return negative ? -r : r;
}

struct Term {
  Parts value;  // the term's value (significand, lsb, sign)
  int exponent;  // the model's alignment exponent
};

// Sum of the terms truncated to units of 2^(E - F), E their largest exponent; rounded toward
// zero to FP32 (24 significant bits, or the 2^-149 quantum below 2^-126; >= 2^128 is inf).
float fused_truncated_sum(const std::vector<Term>& terms, int fraction_bits) {
  int e_max = std::numeric_limits<int>::min();
  for (const Term& t : terms) e_max = std::max(e_max, t.exponent);
  const int unit = e_max - fraction_bits;
  Int sum = 0;
  for (const Term& t : terms) sum += shifted(t.value.significand, t.value.lsb - unit, t.value.negative);
  if (sum == 0) return 0.0f;
  const bool negative = sum < 0;
  Int magnitude = negative ? -sum : sum;
  int bits = 0;
  while ((magnitude >> bits) != 0) ++bits;
  const int lead = unit + bits - 1;
  if (lead >= 128) return negative ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
  const int keep_from = std::max(lead - 23, -149);  // exponent of the last kept bit
  if (keep_from > unit) {
    magnitude >>= (keep_from - unit);
    if (magnitude == 0) return 0.0f;
    const double v = std::ldexp(static_cast<double>(static_cast<std::int64_t>(magnitude)), keep_from);
    return static_cast<float>(negative ? -v : v);
  }
  const double v = std::ldexp(static_cast<double>(static_cast<std::int64_t>(magnitude)), unit);
  return static_cast<float>(negative ? -v : v);
}

Term accumulator_term(float c, int zero_exponent) {
  Parts p = fp32_parts(std::fabs(static_cast<double>(c)));
  p.negative = c < 0.0f;
  return {p, c == 0.0f ? zero_exponent : p.lead};
}

double scale_at(const BlockScaledOperandRef& op, Eigen::Index row, Eigen::Index k) {
  const Eigen::Index last_col = op.scales->cols() - 1;
  return (*op.scales)(row / op.tile_rows, std::min(k / op.tile_cols, last_col));
}

std::uint32_t code_at(const BlockScaledOperandRef& op, Eigen::Index row, Eigen::Index k) {
  return k < op.codes->cols() ? (*op.codes)(row, k) : 0u;  // K padding: +0
}

// kind::mxf8f6f4: F = 25, 32 products, zero terms at -133, one UE8M0 scale pair per instruction.
float mxf8f6f4_instruction(float c, const BlockScaledOperandRef& a, Eigen::Index m, const BlockScaledOperandRef& b,
                           Eigen::Index n, Eigen::Index k0) {
  const Parts sa = scale_parts(scale_at(a, m, k0), a.e4m3_scales), sb = scale_parts(scale_at(b, n, k0), b.e4m3_scales);
  std::vector<Term> terms{accumulator_term(c, -133)};
  for (Eigen::Index k = k0; k < k0 + 32; ++k) {
    const Parts x = element_parts(code_at(a, m, k), *a.format), y = element_parts(code_at(b, n, k), *b.format);
    Parts product;
    product.negative = x.negative != y.negative;
    product.significand = x.significand * y.significand;
    product.lsb = x.lsb + y.lsb + sa.lsb + sb.lsb;
    const int exponent = product.significand == 0 ? -133 : x.lead + y.lead + sa.lead + sb.lead;
    terms.push_back({product, exponent});
  }
  return fused_truncated_sum(terms, 25);
}

// kind::mxf4nvf4: F = 35, 64 products in 4 groups of 16 summed exactly, a scale pair per group,
// zero terms at -139.
float mxf4nvf4_instruction(float c, const BlockScaledOperandRef& a, Eigen::Index m, const BlockScaledOperandRef& b,
                           Eigen::Index n, Eigen::Index k0) {
  std::vector<Term> terms{accumulator_term(c, -139)};
  for (Eigen::Index g0 = k0; g0 < k0 + 64; g0 += 16) {
    // The group sum in units of 2^(2 * (lowest lsb)): E2M1's lsb is at least -1, so 2^-2.
    Int group = 0;
    bool all_zero = true;
    for (Eigen::Index k = g0; k < g0 + 16; ++k) {
      const Parts x = element_parts(code_at(a, m, k), *a.format), y = element_parts(code_at(b, n, k), *b.format);
      const Int product = x.significand * y.significand;
      all_zero = all_zero && product == 0;
      const Int in_units = product << (x.lsb + y.lsb + 2);
      group += x.negative != y.negative ? -in_units : in_units;
    }
    const Parts sa = scale_parts(scale_at(a, m, g0), a.e4m3_scales), sb = scale_parts(scale_at(b, n, g0), b.e4m3_scales);
    const Int scale_significand = sa.significand * sb.significand;
    Parts term;
    term.negative = group < 0;
    term.significand = (group < 0 ? -group : group) * scale_significand;
    term.lsb = -2 + sa.lsb + sb.lsb;
    const int exponent = all_zero || scale_significand == 0 ? -139 : sa.lead + sb.lead;
    terms.push_back({term, exponent});
  }
  return fused_truncated_sum(terms, 35);
}

}  // namespace

Eigen::MatrixXf block_scaled_mma_ref(const BlockScaledOperandRef& a, const BlockScaledOperandRef& b,
                                     BlockScaledInstructionRef instruction, float alpha, bool bf16_output) {
  const Eigen::Index M = a.codes->rows(), N = b.codes->rows(), K = a.codes->cols();
  const Eigen::Index depth = instruction == BlockScaledInstructionRef::mxf8f6f4 ? 32 : 64;
  const Eigen::Index padded_k = std::max<Eigen::Index>(depth, (K + depth - 1) / depth * depth);
  Eigen::MatrixXf out(M, N);
  for (Eigen::Index m = 0; m < M; ++m)
    for (Eigen::Index n = 0; n < N; ++n) {
      float c = 0.0f;
      for (Eigen::Index k0 = 0; k0 < padded_k; k0 += depth) {
        if (!std::isfinite(c)) break;  // an overflow to inf stays inf: the products are finite
        c = instruction == BlockScaledInstructionRef::mxf8f6f4 ? mxf8f6f4_instruction(c, a, m, b, n, k0)
                                                               : mxf4nvf4_instruction(c, a, m, b, n, k0);
      }
      const float d = c * alpha;
      out(m, n) = bf16_output ? static_cast<float>(round_to_format(d, ref::bf16(), /*saturate=*/false)) : d;
    }
  return out;
}

}  // namespace fp8lab::ref
