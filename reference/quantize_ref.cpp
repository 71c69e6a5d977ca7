#include "reference/quantize_ref.hpp"

#include <cmath>
#include <stdexcept>
#include <vector>

#include "reference/nvfp4_4over6_ref.hpp"

namespace fp8lab::ref {
namespace {

// One rounding of an FP64 value to FP32 (scale_rules_ref.hpp: why through fl32, and why
// quotients rounded twice are still correct).
double to_fp32(double v) { return fl32(v); }

}  // namespace

QuantizedRef quantize_ref(const Eigen::MatrixXd& x, Eigen::Index tile_rows, Eigen::Index tile_cols,
                          const FormatDefinition& format, ScaleRuleRef rule, const RoundingRef& rounding) {
  if (rule == ScaleRuleRef::nvfp4_4over6) {  // a block's scale depends on its elements' errors
    if (rounding.stochastic || format.name != e2m1().name)
      throw std::invalid_argument("quantize_ref: nvfp4:4over6 is E2M1 with nearest rounding only");
    return quantize_nvfp4_4over6_ref(x, tile_rows, tile_cols);
  }
  const Eigen::Index grid_rows = (x.rows() + tile_rows - 1) / tile_rows;
  const Eigen::Index grid_cols = (x.cols() + tile_cols - 1) / tile_cols;
  Eigen::MatrixXd amax = Eigen::MatrixXd::Zero(grid_rows, grid_cols);
  for (Eigen::Index i = 0; i < x.rows(); ++i)
    for (Eigen::Index j = 0; j < x.cols(); ++j) {
      double& m = amax(i / tile_rows, j / tile_cols);
      const double v = std::fabs(x(i, j));
      if (std::isnan(v) || v > m) m = v;  // a NaN is the maximum and stays
    }
  double tensor_amax = 0.0;
  for (const double m : amax.reshaped())
    if (std::isnan(m) || m > tensor_amax) tensor_amax = m;

  QuantizedRef out;
  out.tensor_scale = tensor_scale_ref(tensor_amax, rule, format);
  const Eigen::Index tiles = grid_rows * grid_cols;
  std::vector<TileScaleRef> tile(static_cast<std::size_t>(tiles));
  out.scales.resize(grid_rows, grid_cols);
  for (Eigen::Index t = 0; t < tiles; ++t) {
    tile[static_cast<std::size_t>(t)] = tile_scale_ref(amax(t / grid_cols, t % grid_cols), rule, format, out.tensor_scale);
    out.scales(t / grid_cols, t % grid_cols) = tile[static_cast<std::size_t>(t)].decode;
  }
  out.codes.resize(x.rows(), x.cols());
  out.dequantized.resize(x.rows(), x.cols());
  for (Eigen::Index i = 0; i < x.rows(); ++i)
    for (Eigen::Index j = 0; j < x.cols(); ++j) {
      const TileScaleRef& s = tile[static_cast<std::size_t>((i / tile_rows) * grid_cols + j / tile_cols)];
      const double scaled = s.divide ? to_fp32(x(i, j) / s.encode) : to_fp32(x(i, j) * s.encode);
      const auto index = static_cast<std::uint64_t>(i * x.cols() + j);
      const double q = round_element_ref(scaled, format, rounding, index);
      out.codes(i, j) = code_of_value(q, format);
      // Dequantize the code's value: a format without NaN holds a NaN input as -0 (its contract).
      const double held = std::isnan(q) && !format.has_nan ? -0.0 : q;
      out.dequantized(i, j) = to_fp32(held * to_fp32(s.decode * out.tensor_scale.decode));
    }
  return out;
}

QuantizedRef requantize_transposed_ref(const QuantizedRef& tiles_1xT, Eigen::Index tile,
                                       const FormatDefinition& format, ScaleRuleRef rule) {
  const Eigen::MatrixXd transposed = tiles_1xT.dequantized.transpose();
  return quantize_ref(transposed, 1, tile, format, rule);
}

}  // namespace fp8lab::ref
