#include "kernels/scale_layouts.hpp"

#include <stdexcept>

namespace fp8lab {

std::vector<float> vec128_scales_rows_fastest(const QuantizedTensor& q) {
  if (q.config.granularity != Granularity::tile(128))
    throw std::invalid_argument("VEC128_32F scales need tile:1x128 quantization, not " + q.config.granularity.to_string());
  std::vector<float> out(static_cast<std::size_t>(q.scale_rows * q.scale_cols));
  for (std::int64_t r = 0; r < q.scale_rows; ++r)
    for (std::int64_t l = 0; l < q.scale_cols; ++l)
      out[static_cast<std::size_t>(l * q.scale_rows + r)] = q.scales[static_cast<std::size_t>(r * q.scale_cols + l)];
  return out;
}

std::int64_t blk128x128_padded_k_blocks(std::int64_t k) {
  const std::int64_t l = (k + 127) / 128;
  return (l + 3) / 4 * 4;
}

std::vector<float> blk128x128_scales_k_fastest(const QuantizedTensor& q) {
  if (q.config.granularity != Granularity::block(128))
    throw std::invalid_argument("BLK128x128_32F scales need block:128x128 quantization, not " +
                                q.config.granularity.to_string());
  const std::int64_t l4 = blk128x128_padded_k_blocks(q.cols);
  std::vector<float> out(static_cast<std::size_t>(q.scale_rows * l4), 1.0f);
  for (std::int64_t rb = 0; rb < q.scale_rows; ++rb)
    for (std::int64_t l = 0; l < q.scale_cols; ++l)
      out[static_cast<std::size_t>(rb * l4 + l)] = q.scales[static_cast<std::size_t>(rb * q.scale_cols + l)];
  return out;
}

}  // namespace fp8lab
