#pragma once
// The backward pass's re-quantization (DeepSeek-V3 sec. 3.5.2): an activation cached as
// 1xT tiles (rows = tokens, cols = channels) is needed by Wgrad with tokens along K, i.e.
// as Tx1 tiles. It is read, dequantized (x' = fl32(q * sf)), transposed, and quantized
// again, so it carries two rounding steps: a measurable error source of its own.
#include "kernels/quantization.hpp"

namespace fp8lab::cpu {

// in: rows x cols quantized with tile:1xT. Returns the transposed tensor, cols x rows,
// quantized with tile:1xT along its rows (= Tx1 tiles of the original), with the same
// format and scale rule. Throws std::invalid_argument for any other granularity.
QuantizedTensor requantize_transposed(const QuantizedTensor& in);

}  // namespace fp8lab::cpu
