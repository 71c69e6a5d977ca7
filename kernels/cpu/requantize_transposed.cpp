#include "kernels/cpu/requantize_transposed.hpp"

#include <stdexcept>

#include "kernels/cpu/quantize.hpp"
#include "kernels/cpu/transpose.hpp"

namespace fp8lab::cpu {

QuantizedTensor requantize_transposed(const QuantizedTensor& in) {
  if (in.config.granularity.kind != Granularity::Kind::tile)
    throw std::invalid_argument("requantize_transposed: input must be quantized with tile:1xT, not " +
                                in.config.granularity.to_string());
  const std::vector<float> dequantized = dequantize(in);  // rows x cols
  std::vector<float> transposed(dequantized.size());      // cols x rows
  // On the thread team from the quantizer's threshold (a copy: same bits).
  transpose(dequantized.data(), in.rows, in.cols, in.cols, transposed.data(), in.rows * in.cols >= kParallelQuantizeElements);
  return quantize(transposed, in.cols, in.rows, in.config);
}

}  // namespace fp8lab::cpu
