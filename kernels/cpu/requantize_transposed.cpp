#include "kernels/cpu/requantize_transposed.hpp"

#include <memory>
#include <stdexcept>

#include "kernels/cpu/quantize.hpp"
#include "kernels/cpu/transpose.hpp"

namespace fp8lab::cpu {

QuantizedTensor requantize_transposed(const QuantizedTensor& in) {
  if (in.config.granularity.kind != Granularity::Kind::tile)
    throw std::invalid_argument("requantize_transposed: input must be quantized with tile:1xT, not " +
                                in.config.granularity.to_string());
  // Buffers left uninitialized (every value is written): zero-filling them ran serially.
  const auto size = static_cast<std::size_t>(in.rows * in.cols);
  const auto dequantized = std::make_unique_for_overwrite<float[]>(size);  // rows x cols
  const auto transposed = std::make_unique_for_overwrite<float[]>(size);   // cols x rows
  dequantize_into(in, {dequantized.get(), size});
  // On the thread team from the quantizer's threshold (a copy: same bits).
  transpose(dequantized.get(), in.rows, in.cols, in.cols, transposed.get(), in.rows * in.cols >= kParallelQuantizeElements);
  return quantize({transposed.get(), size}, in.cols, in.rows, in.config);
}

}  // namespace fp8lab::cpu
