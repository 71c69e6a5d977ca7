#pragma once
// CPU backend quantizer: FP32 tensor -> element codes (FP8, or FP4/FP6 in the low bits of a
// uint8) + one FP32 scale per tile.
//
// Contract (DESIGN.md section 2, identical on every backend and in reference/quantize_ref):
//   amax = max |x| over the tile (padding counts as 0); for the two-level rules (nvfp4) the
//          tensor's amax first gives tensor_scale (kernels/scale_rules.hpp)
//   {decode, encode} = tile_scale(amax, rule, format traits, tensor scale)
//   q    = cvt_rn_satfinite(fl32(x * encode)), or of fl32(x / encode) for rules that divide;
//          for fp32 and pow2 encode = fl32(1 / sf), the historical q = x * fl32(1 / sf);
//          with config.rounding stochastic, that value is rounded stochastically instead, element
//          (r, c) drawing from (seed, r * cols + c) (kernels/formats/stochastic_rounding.hpp)
//   x'   = fl32(decode(q) * fl32(decode * tensor decode)) (the tensor factor is 1 but for nvfp4;
//          dequantized, FP32 as a GPU holds it)
// NaN in a tile makes its scale NaN (or as the rule defines, see scale_rules.hpp) and its
// codes NaN; callers that must reject non-finite input (the harness) do so before quantizing.
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/quantization.hpp"

namespace fp8lab::cpu {

// Below this many elements a tensor is quantized (and dequantized, re-quantized transposed) on
// one thread (a thread team's start would cost more than the work). 2^13: stories260K's 256 x 64
// operands (2^14) then use both threads, which took its 2-thread FP8 step from 42.7 to 39.6 ms
// (at 2^16 they ran on one).
inline constexpr std::int64_t kParallelQuantizeElements = std::int64_t{1} << 13;

// x is rows x cols row-major.
QuantizedTensor quantize(std::span<const float> x, std::int64_t rows, std::int64_t cols,
                         const QuantizeConfig& config);

// The same into caller-owned storage whose geometry came from make_quantized_tensor
// (the benchmark reuses one output across iterations).
void quantize_into(std::span<const float> x, QuantizedTensor& out);

// x' = fl32(decode(q) * fl32(sf * tensor decode)), rows x cols row-major.
std::vector<float> dequantize(const QuantizedTensor& q);

// The same into caller-owned storage of q.rows * q.cols floats (requantize_transposed's
// uninitialized buffer: a vector's zero fill was a serial memset beside a parallel pass).
void dequantize_into(const QuantizedTensor& q, std::span<float> x);

// x'^T (cols x rows), the same values as dequantize's transposed, into caller-owned storage:
// the codes are transposed as bytes and decoded in the transposed order (requantize_transposed;
// a transpose of the FP32 values moved four times the bytes).
void dequantize_transposed_into(const QuantizedTensor& q, std::span<float> xt);

}  // namespace fp8lab::cpu
