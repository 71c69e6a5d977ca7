#pragma once
// FP64 reference for nvfp4:4over6 (Transformer Engine's 4over6 NVFP4, its defaults: MAE, E4M3
// bound 256; the definition is kernels/nvfp4_4over6.hpp's, rewritten here from it with FP64
// arithmetic rounded to FP32 where TE rounds, blocks zero-padded to 16 x 16 or 1 x 16).
#include <Eigen/Dense>

#include "reference/quantize_ref.hpp"

namespace fp8lab::ref {

// x (FP32 values) quantized to E2M1 with 1x16 (tile_rows 1) or 16x16 blocks; each block keeps
// the candidate (map-to-4 or map-to-6) with the smaller FP32 sum of |dequantized - x|.
QuantizedRef quantize_nvfp4_4over6_ref(const Eigen::MatrixXd& x, Eigen::Index tile_rows, Eigen::Index tile_cols);

}  // namespace fp8lab::ref
