#include "kernels/cpu/requantize_transposed.hpp"

#include <memory>
#include <stdexcept>

#include "kernels/cpu/quantize.hpp"

namespace fp8lab::cpu {

QuantizedTensor requantize_transposed(const QuantizedTensor& in) {
  if (in.config.granularity.kind != Granularity::Kind::tile)
    throw std::invalid_argument("requantize_transposed: input must be quantized with tile:1xT, not " +
                                in.config.granularity.to_string());
  // Left uninitialized (every value is written): zero-filling it ran serially.
  const auto size = static_cast<std::size_t>(in.rows * in.cols);
  const auto transposed = std::make_unique_for_overwrite<float[]>(size);  // cols x rows
  dequantize_transposed_into(in, {transposed.get(), size});
  return quantize({transposed.get(), size}, in.cols, in.rows, in.config);
}

}  // namespace fp8lab::cpu
