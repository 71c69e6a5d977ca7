#include "reference/quantize_ref.hpp"

#include <cmath>

namespace fp8lab::ref {
namespace {

// fl32(v): one rounding of an FP64 value to FP32.
double to_fp32(double v) { return static_cast<double>(static_cast<float>(v)); }

double scale_from_amax(double amax, const FormatDefinition& format, ScaleRuleRef rule) {
  if (amax == 0.0) return 1.0;
  // fl32(amax / fmt_max) computed as fl32(fl64(amax / fmt_max)): rounding twice is safe here.
  // fmt_max = 7 * 2^k and amax is an FP32 value, so amax / fmt_max never equals an FP32
  // rounding midpoint (that would need a 24-bit amax equal to 7 times a 25-bit odd
  // significand) and lies at least 2^-28 (relative) away from one; the FP64 rounding moves
  // it by at most 2^-53, which cannot carry it across a midpoint.
  double sf = to_fp32(amax / format.max_finite);
  if (rule == ScaleRuleRef::pow2) {
    int e = 0;
    const double f = std::frexp(sf, &e);  // sf = f 2^e, f in [0.5, 1)
    sf = (f == 0.5) ? sf : std::ldexp(1.0, e);
  }
  return std::max(sf, std::ldexp(1.0, -126));
}

}  // namespace

QuantizedRef quantize_ref(const Eigen::MatrixXd& x, Eigen::Index tile_rows, Eigen::Index tile_cols,
                          const FormatDefinition& format, ScaleRuleRef rule) {
  const Eigen::Index grid_rows = (x.rows() + tile_rows - 1) / tile_rows;
  const Eigen::Index grid_cols = (x.cols() + tile_cols - 1) / tile_cols;
  Eigen::MatrixXd amax = Eigen::MatrixXd::Zero(grid_rows, grid_cols);
  for (Eigen::Index i = 0; i < x.rows(); ++i)
    for (Eigen::Index j = 0; j < x.cols(); ++j) {
      double& m = amax(i / tile_rows, j / tile_cols);
      m = std::max(m, std::fabs(x(i, j)));
    }

  QuantizedRef out;
  out.scales = amax.unaryExpr([&](double a) { return scale_from_amax(a, format, rule); });
  out.codes.resize(x.rows(), x.cols());
  out.dequantized.resize(x.rows(), x.cols());
  for (Eigen::Index i = 0; i < x.rows(); ++i)
    for (Eigen::Index j = 0; j < x.cols(); ++j) {
      const double sf = out.scales(i / tile_rows, j / tile_cols);
      // fl32(1 / sf) through FP64 is safe for the same reason as above: 1 / sf of an FP32 sf
      // is never an FP32 midpoint (sf * m = 1 forces m to be a power of two) and sits at least
      // 2^-49 (relative) away from one.
      const double inverse = to_fp32(1.0 / sf);
      const double scaled = to_fp32(x(i, j) * inverse);  // the FP64 product of two FP32 values is exact
      const double q = round_to_format(scaled, format, /*saturate=*/true);
      out.codes(i, j) = code_of_value(q, format);
      out.dequantized(i, j) = to_fp32(q * sf);  // exact in FP64, one rounding to FP32
    }
  return out;
}

QuantizedRef requantize_transposed_ref(const QuantizedRef& tiles_1xT, Eigen::Index tile,
                                       const FormatDefinition& format, ScaleRuleRef rule) {
  const Eigen::MatrixXd transposed = tiles_1xT.dequantized.transpose();
  return quantize_ref(transposed, 1, tile, format, rule);
}

}  // namespace fp8lab::ref
