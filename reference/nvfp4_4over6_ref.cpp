#include "reference/nvfp4_4over6_ref.hpp"

#include <cmath>
#include <stdexcept>
#include <vector>

namespace fp8lab::ref {
namespace {

constexpr int kBlock = 16;

struct Candidate {
  TileScaleRef scale;
  Eigen::MatrixXd values;  // kBlock x kBlock E2M1 values (zero padding included)
  double error = 0.0;      // FP32 value
};

// The block's elements, zero-padded to kBlock x kBlock (rows beyond a 1x16 block stay 0).
Eigen::MatrixXd block_of(const Eigen::MatrixXd& x, Eigen::Index r0, Eigen::Index c0, Eigen::Index rows) {
  Eigen::MatrixXd b = Eigen::MatrixXd::Zero(kBlock, kBlock);
  for (Eigen::Index i = 0; i < rows && r0 + i < x.rows(); ++i)
    for (Eigen::Index j = 0; j < kBlock && c0 + j < x.cols(); ++j) b(i, j) = x(r0 + i, c0 + j);
  return b;
}

Candidate candidate(const Eigen::MatrixXd& block, const TileScaleRef& s, double tensor_amax) {
  Candidate c{s, Eigen::MatrixXd::Zero(kBlock, kBlock), 0.0};
  // Each row's |error| summed left to right in FP32; then rows combined pairwise, TE's warp
  // reduction: row i with row i + 8 (i < 8), then i + 4 (i < 4), i + 2, i + 1.
  std::vector<double> row_error(kBlock, 0.0);
  for (int i = 0; i < kBlock; ++i)
    for (int j = 0; j < kBlock; ++j) {
      const double q = round_to_format(fl32(block(i, j) * s.encode), e2m1(), /*saturate=*/true);
      c.values(i, j) = q;
      const double dequantized = fl32(fl32(fl32(q * s.decode) * tensor_amax) / 1536.0);
      row_error[i] = fl32(row_error[i] + std::fabs(fl32(dequantized - block(i, j))));
    }
  for (int half = kBlock / 2; half >= 1; half /= 2)
    for (int i = 0; i < half; ++i) row_error[i] = fl32(row_error[i] + row_error[i + half]);
  c.error = row_error[0];
  return c;
}

}  // namespace

QuantizedRef quantize_nvfp4_4over6_ref(const Eigen::MatrixXd& x, Eigen::Index tile_rows, Eigen::Index tile_cols) {
  if (tile_cols != kBlock || (tile_rows != 1 && tile_rows != kBlock))
    throw std::invalid_argument("quantize_nvfp4_4over6_ref: blocks are 1x16 or 16x16");
  double tensor_amax = 0.0;
  for (const double v : x.reshaped())
    if (std::isnan(std::fabs(v)) || std::fabs(v) > tensor_amax) tensor_amax = std::fabs(v);
  QuantizedRef out;
  out.tensor_scale = tensor_scale_ref(tensor_amax, ScaleRuleRef::nvfp4_4over6, e2m1());
  const Eigen::Index grid_rows = (x.rows() + tile_rows - 1) / tile_rows, grid_cols = (x.cols() + kBlock - 1) / kBlock;
  out.scales.resize(grid_rows, grid_cols);
  out.codes.resize(x.rows(), x.cols());
  out.dequantized.resize(x.rows(), x.cols());
  for (Eigen::Index bi = 0; bi < grid_rows; ++bi)
    for (Eigen::Index bj = 0; bj < grid_cols; ++bj) {
      const Eigen::MatrixXd block = block_of(x, bi * tile_rows, bj * kBlock, tile_rows);
      const double amax = block.cwiseAbs().maxCoeff();
      const Candidate map4 = candidate(block, nvfp4_4over6_candidate_ref(amax, e2m1(), out.tensor_scale, true), tensor_amax);
      const Candidate map6 = candidate(block, nvfp4_4over6_candidate_ref(amax, e2m1(), out.tensor_scale, false), tensor_amax);
      const Candidate& kept = map4.error < map6.error ? map4 : map6;  // a tie keeps map-to-6
      out.scales(bi, bj) = kept.scale.decode;
      for (Eigen::Index i = 0; i < tile_rows && bi * tile_rows + i < x.rows(); ++i)
        for (Eigen::Index j = 0; j < kBlock && bj * kBlock + j < x.cols(); ++j) {
          const double q = kept.values(i, j);
          out.codes(bi * tile_rows + i, bj * kBlock + j) = code_of_value(q, e2m1());
          out.dequantized(bi * tile_rows + i, bj * kBlock + j) = fl32(q * fl32(kept.scale.decode * out.tensor_scale.decode));
        }
    }
  return out;
}

}  // namespace fp8lab::ref
