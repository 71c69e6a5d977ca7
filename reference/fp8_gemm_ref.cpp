#include "reference/fp8_gemm_ref.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace fp8lab::ref {
namespace {

// value = sign * significand * 2^(exponent - M), exponent unnormalized (min_exponent for
// zero and subnormals), as the model aligns products without renormalizing them.
struct Decomposed {
  bool negative = false;
  std::int64_t significand = 0;
  int exponent = 0;
  bool finite = true;
  double value = 0;  // for the non-finite path and the fp32 model
};

Decomposed decompose(std::uint32_t code, const FormatDefinition& f) {
  Decomposed d;
  const std::uint32_t fraction = code & ((1u << f.mantissa_bits) - 1u);
  const std::uint32_t field = (code >> f.mantissa_bits) & ((1u << f.exponent_bits) - 1u);
  const std::uint32_t all_ones = (1u << f.exponent_bits) - 1u;
  d.negative = (code >> (f.exponent_bits + f.mantissa_bits)) & 1u;
  // The MX element formats (E2M1, E3M2, E2M3) have no NaN: their all-ones code is their maximum.
  const bool nan = f.has_nan && (f.has_infinity ? (field == all_ones && fraction != 0)
                                                : (field == all_ones && fraction == (1u << f.mantissa_bits) - 1u));
  if (nan || (f.has_infinity && field == all_ones)) {
    d.finite = false;
    d.value = nan ? std::numeric_limits<double>::quiet_NaN()
                  : (d.negative ? -1.0 : 1.0) * std::numeric_limits<double>::infinity();
    return d;
  }
  d.significand = field == 0 ? fraction : (1u << f.mantissa_bits) + fraction;
  d.exponent = field == 0 ? f.min_exponent : static_cast<int>(field) + f.min_exponent - 1;
  d.value = (d.negative ? -1.0 : 1.0) * std::ldexp(static_cast<double>(d.significand), d.exponent - f.mantissa_bits);
  return d;
}

// x * 2^shift rounded to an integer (toward zero, or to nearest even), x >= 0.
std::int64_t shift_round(std::int64_t x, int shift, bool nearest_even) {
  if (shift >= 0) return x << shift;
  const int drop = -shift;
  if (drop >= 62) return 0;  // far below one unit: |x| < 2^30 here, so this rounds to 0 either way
  const std::int64_t kept = x >> drop, remainder = x - (kept << drop), half = std::int64_t{1} << (drop - 1);
  if (nearest_even && (remainder > half || (remainder == half && (kept & 1)))) return kept + 1;
  return kept;
}

// The FP32 partial c as significand * 2^(exponent - 23), 24-bit significand; zero and FP32
// subnormals use exponent -126 as the model says.
void split_fp32(float c, bool& negative, std::int64_t& significand, int& exponent) {
  negative = std::signbit(c);
  const double magnitude = std::fabs(static_cast<double>(c));
  if (magnitude < std::ldexp(1.0, -126)) {
    exponent = -126;
  } else {
    int e = 0;
    std::frexp(magnitude, &e);
    exponent = e - 1;
  }
  significand = static_cast<std::int64_t>(std::ldexp(magnitude, 23 - exponent));  // exact
}

// One instruction of the fused model: the incoming partial c and the products of a and b
// over k in [k0, k0 + depth).
// a_mantissa_bits and b_mantissa_bits are each operand's format's (E4M3: 3, E5M2: 2; they
// differ in a mixed GEMM).
float fused_instruction(float c, const Decomposed* a, const Decomposed* b, int depth, const AccumulationRef& model,
                        int a_mantissa_bits, int b_mantissa_bits) {
  bool finite = std::isfinite(c);
  for (int k = 0; k < depth; ++k) finite = finite && a[k].finite && b[k].finite;
  if (!finite) {  // step 5: the IEEE double sum decides
    double sum = c;
    for (int k = 0; k < depth; ++k) sum += a[k].value * b[k].value;
    return std::isnan(sum) ? std::bit_cast<float>(0x7FFFFFFFu) : static_cast<float>(sum);
  }
  bool c_negative = false;
  std::int64_t c_significand = 0;
  int c_exponent = 0;
  split_fp32(c, c_negative, c_significand, c_exponent);
  // Step 2: E = max of the exponents, c included.
  int e_max = c_exponent;
  for (int k = 0; k < depth; ++k) e_max = std::max(e_max, a[k].exponent + b[k].exponent);
  // Step 3: every term in units of 2^(E - F), rounded on its own.
  const int F = model.fraction_bits;
  const bool rne = model.round_to_nearest_even;
  std::int64_t sum = shift_round(c_significand, c_exponent - 23 + F - e_max, rne) * (c_negative ? -1 : 1);
  for (int k = 0; k < depth; ++k) {
    // a_k b_k = (sa sb) 2^(ea + eb - Ma - Mb)
    const std::int64_t product = a[k].significand * b[k].significand;
    const std::int64_t term =
        shift_round(product, a[k].exponent + b[k].exponent - a_mantissa_bits - b_mantissa_bits + F - e_max, rne);
    sum += (a[k].negative != b[k].negative) ? -term : term;
  }
  // Step 4: S 2^(E - F) normalized, its significand kept to min(F, 23) fraction bits.
  if (sum == 0) return 0.0f;
  std::int64_t magnitude = sum < 0 ? -sum : sum;
  int leading = 0;
  while ((magnitude >> (leading + 1)) != 0) ++leading;
  const int kept_bits = std::min(F, 23);
  if (leading > kept_bits) {
    const int drop = leading - kept_bits;
    magnitude = shift_round(magnitude, -drop, rne) << drop;
  }
  const double value = std::ldexp(static_cast<double>(magnitude), e_max - F);
  return static_cast<float>(sum < 0 ? -value : value);  // exact: at most 24 significant bits
}

double scale_at(const Fp8OperandRef& op, Eigen::Index row, Eigen::Index k) {
  const Eigen::Index last_col = op.scales->cols() - 1;
  return (*op.scales)(row / op.tile_rows, std::min(k / op.tile_cols, last_col));
}

}  // namespace

Eigen::MatrixXf fp8_gemm_model_ref(const Fp8OperandRef& a, const Fp8OperandRef& b, const AccumulationRef& model,
                                   Eigen::Index interval, bool bf16_output) {
  const Eigen::Index M = a.codes->rows(), N = b.codes->rows(), K = a.codes->cols();
  const int depth = model.fp32_fma ? 32 : model.depth;
  const Eigen::Index padded_k = std::max<Eigen::Index>(depth, (K + depth - 1) / depth * depth);
  const Eigen::Index nc = (interval == 0 || interval > padded_k) ? padded_k : interval;
  // Zero's exponent is the model's convention, not a property of the format.
  const auto take_apart = [&](std::uint32_t code, const FormatDefinition& f) {
    Decomposed d = decompose(code, f);
    if (d.finite && d.significand == 0 && !model.zero_as_subnormal) d.exponent = -126;
    return d;
  };
  // K padding is a zero code of each operand's own format (under zero:min their exponents differ).
  const Decomposed a_zero = take_apart(0, *a.format), b_zero = take_apart(0, *b.format);

  // Every row of B taken apart once (zero-padded to padded_k), then each row of A in turn.
  std::vector<std::vector<Decomposed>> b_rows(static_cast<std::size_t>(N),
                                              std::vector<Decomposed>(static_cast<std::size_t>(padded_k), b_zero));
  for (Eigen::Index n = 0; n < N; ++n)
    for (Eigen::Index k = 0; k < K; ++k) b_rows[static_cast<std::size_t>(n)][static_cast<std::size_t>(k)] = take_apart((*b.codes)(n, k), *b.format);
  Eigen::MatrixXf out(M, N);
  std::vector<Decomposed> ra(static_cast<std::size_t>(padded_k), a_zero);
  for (Eigen::Index m = 0; m < M; ++m) {
    for (Eigen::Index k = 0; k < K; ++k) ra[static_cast<std::size_t>(k)] = take_apart((*a.codes)(m, k), *a.format);
    for (Eigen::Index n = 0; n < N; ++n) {
      const std::vector<Decomposed>& rb = b_rows[static_cast<std::size_t>(n)];
      float acc = 0.0f;
      for (Eigen::Index k0 = 0; k0 < padded_k; k0 += nc) {
        const Eigen::Index k1 = std::min(padded_k, k0 + nc);
        float p = 0.0f;
        for (Eigen::Index k = k0; k < k1; k += depth) {
          if (model.fp32_fma) {
            for (Eigen::Index j = k; j < k + depth; ++j)
              p = std::fmaf(static_cast<float>(ra[static_cast<std::size_t>(j)].value),
                            static_cast<float>(rb[static_cast<std::size_t>(j)].value), p);
          } else {
            p = fused_instruction(p, &ra[static_cast<std::size_t>(k)], &rb[static_cast<std::size_t>(k)], depth, model,
                                  a.format->mantissa_bits, b.format->mantissa_bits);
          }
        }
        // Promotion: s = fl32(s_a s_b) (the FP64 product of two FP32 values is exact), then one FMA.
        const auto s = static_cast<float>(scale_at(a, m, k0) * scale_at(b, n, k0));
        acc = std::fmaf(p, s, acc);
      }
      out(m, n) = bf16_output ? static_cast<float>(round_to_format(acc, bf16(), /*saturate=*/false)) : acc;
    }
  }
  return out;
}

Eigen::MatrixXd dequantize_fp64(const Fp8OperandRef& operand) {
  const CodeMatrix& codes = *operand.codes;
  Eigen::MatrixXd out(codes.rows(), codes.cols());
  for (Eigen::Index i = 0; i < codes.rows(); ++i)
    for (Eigen::Index k = 0; k < codes.cols(); ++k)
      out(i, k) = decompose(codes(i, k), *operand.format).value * scale_at(operand, i, k);
  return out;
}

}  // namespace fp8lab::ref
