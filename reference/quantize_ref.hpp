#pragma once
// FP64 reference for tile/block quantization, written from DESIGN.md section 2's
// formula and sharing no code with kernels/:
//   amax = max |x| over the tile; {decode, encode} = tile_scale_ref(amax, rule) (the rules:
//   reference/scale_rules_ref; for fp32: sf = fl32(amax / fmt_max), 1 for an all-zero tile,
//   at least 2^-126, encode = fl32(1 / sf)); q = RNE-satfinite(fl32(x * encode)) (or x / encode);
//   x' = fl32(q * fl32(decode * tensor decode)), the tensor factor 1 but for the nvfp4 rules,
//   whose per-tensor level comes from the whole tensor's amax first.
// A tile is tile_rows x tile_cols; element (i, j) belongs to tile (i / tile_rows, j / tile_cols),
// so a ragged last tile is the zero-padded one.
#include <Eigen/Dense>
#include <cstdint>

#include "reference/float_formats_ref.hpp"
#include "reference/scale_rules_ref.hpp"
#include "reference/stochastic_rounding_ref.hpp"

namespace fp8lab::ref {

using CodeMatrix = Eigen::Matrix<std::uint32_t, Eigen::Dynamic, Eigen::Dynamic>;

struct QuantizedRef {
  CodeMatrix codes;             // rows x cols
  Eigen::MatrixXd scales;       // ceil(rows / tile_rows) x ceil(cols / tile_cols), FP32 values
  Eigen::MatrixXd dequantized;  // rows x cols, FP32 values
  TensorScaleRef tensor_scale;  // {1, 1} but for the two-level rules
};

// x must hold FP32 values (the operand as the kernel sees it). rounding: of the scaled elements,
// nearest or stochastic (element (i, j) draws with index i * cols + j).
QuantizedRef quantize_ref(const Eigen::MatrixXd& x, Eigen::Index tile_rows, Eigen::Index tile_cols,
                          const FormatDefinition& format, ScaleRuleRef rule, const RoundingRef& rounding = {});

// The backward re-quantization from the math: dequantize 1xT tiles, transpose, quantize
// again with 1xT tiles along the transposed rows. Returns the quantization of x'^T.
QuantizedRef requantize_transposed_ref(const QuantizedRef& tiles_1xT, Eigen::Index tile,
                                       const FormatDefinition& format, ScaleRuleRef rule);

}  // namespace fp8lab::ref
