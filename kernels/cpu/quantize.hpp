#pragma once
// CPU backend quantizer: FP32 tensor -> FP8 codes + one FP32 scale per tile.
//
// Contract (DESIGN.md section 2, identical on every backend and in reference/quantize_ref):
//   amax = max |x| over the tile (padding counts as 0)
//   sf   = tile_scale(amax, fmt_max, rule)              (kernels/quantization.hpp)
//   q    = cvt_rn_satfinite(fl32(x * fl32(1 / sf)))      (kernels/formats/float_formats.hpp)
//   x'   = fl32(decode(q) * sf)                          (dequantized, FP32 as a GPU holds it)
// NaN in a tile makes its scale NaN and its codes NaN; +-inf makes the scale inf. Callers
// that must reject non-finite input (the harness) do so before quantizing.
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/quantization.hpp"

namespace fp8lab::cpu {

// x is rows x cols row-major.
QuantizedTensor quantize(std::span<const float> x, std::int64_t rows, std::int64_t cols,
                         const QuantizeConfig& config);

// The same into caller-owned storage whose geometry came from make_quantized_tensor
// (the benchmark reuses one output across iterations).
void quantize_into(std::span<const float> x, QuantizedTensor& out);

// x' = fl32(decode(q) * sf), rows x cols row-major.
std::vector<float> dequantize(const QuantizedTensor& q);

}  // namespace fp8lab::cpu
