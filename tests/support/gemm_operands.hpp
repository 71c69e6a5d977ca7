#pragma once
// GEMM operands for tests: quantized tensors built from random codes or from data, and
// their view as reference operands (reference/ never sees kernel types).
#include <cmath>
#include <random>
#include <string>

#include "kernels/cpu/quantize.hpp"
#include "reference/fp8_gemm_ref.hpp"

namespace fp8lab::test {

// A's and B's formats: the two single-format GEMMs and the two mixes (E4M3 x E5M2 and E5M2 x
// E4M3, as Transformer Engine's HYBRID backward runs them).
struct FormatPair {
  Fp8Format a, b;
};
constexpr FormatPair kFormatPairs[] = {{Fp8Format::e4m3, Fp8Format::e4m3},
                                       {Fp8Format::e5m2, Fp8Format::e5m2},
                                       {Fp8Format::e4m3, Fp8Format::e5m2},
                                       {Fp8Format::e5m2, Fp8Format::e4m3}};

// Every finite code of the format equally likely (subnormals, zeros, extremes, both signs),
// scales FP32 values spread over 2^-8..2^8 (or powers of two).
inline QuantizedTensor random_code_operand(std::int64_t rows, std::int64_t cols, Fp8Format format,
                                           const std::string& granularity, std::mt19937_64& rng, bool pow2_scales) {
  QuantizedTensor q = make_quantized_tensor(rows, cols, {format, Granularity::parse(granularity), ScaleRule::fp32});
  for (std::uint8_t& code : q.codes) {
    do code = static_cast<std::uint8_t>(rng() & 0xFF);
    while (!std::isfinite(format == Fp8Format::e4m3 ? decode<E4M3>(code) : decode<E5M2>(code)));
  }
  std::uniform_real_distribution<float> log_scale(-8.0f, 8.0f);
  for (float& s : q.scales) s = pow2_scales ? std::exp2(std::round(log_scale(rng))) : std::exp2(log_scale(rng));
  return q;
}

// The reference's view of a quantized operand; keeps the matrices it points to alive.
struct RefOperand {
  ref::CodeMatrix codes;
  Eigen::MatrixXd scales;
  ref::Fp8OperandRef view;

  explicit RefOperand(const QuantizedTensor& q)
      : codes(q.rows, q.cols), scales(q.scale_rows, q.scale_cols) {
    for (std::int64_t r = 0; r < q.rows; ++r)
      for (std::int64_t c = 0; c < q.cols; ++c) codes(r, c) = q.codes[static_cast<std::size_t>(r * q.cols + c)];
    for (std::int64_t r = 0; r < q.scale_rows; ++r)
      for (std::int64_t c = 0; c < q.scale_cols; ++c) scales(r, c) = q.scales[static_cast<std::size_t>(r * q.scale_cols + c)];
    view = {&codes, &scales, q.tile_rows, q.tile_cols, q.config.format == Fp8Format::e4m3 ? &ref::e4m3() : &ref::e5m2()};
  }
  RefOperand(const RefOperand&) = delete;
  RefOperand& operator=(const RefOperand&) = delete;
};

inline ref::AccumulationRef reference_model(const AccumulationModel& m) {
  return {m.kind == AccumulationModel::Kind::fp32, m.fraction_bits, m.depth,
          m.rounding == AccumulationModel::Rounding::rne, m.zero_exponent == AccumulationModel::ZeroExponent::min};
}

}  // namespace fp8lab::test
