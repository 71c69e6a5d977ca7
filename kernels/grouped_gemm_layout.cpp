#include "kernels/grouped_gemm_layout.hpp"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace fp8lab {

void check_grouped_contiguous(const QuantizedTensor& a, std::span<const QuantizedTensor> experts,
                              std::span<const std::int32_t> block_expert) {
  const auto refuse = [](const std::string& why) { throw std::invalid_argument("grouped GEMM (contiguous layout): " + why); };
  if (experts.empty()) refuse("no expert weights");
  if (a.rows % kGroupedBlockRows != 0)
    refuse("M = " + std::to_string(a.rows) + " is not a multiple of 128 (pad each expert's rows to 128)");
  if (static_cast<std::int64_t>(block_expert.size()) != a.rows / kGroupedBlockRows)
    refuse("block_expert has " + std::to_string(block_expert.size()) + " entries for " +
           std::to_string(a.rows / kGroupedBlockRows) + " blocks of 128 rows");
  const auto count = static_cast<std::int32_t>(experts.size());
  for (std::size_t i = 0; i < block_expert.size(); ++i)
    if (block_expert[i] < -1 || block_expert[i] >= count)
      refuse("block " + std::to_string(i) + " names expert " + std::to_string(block_expert[i]) + " of " +
             std::to_string(count) + " (-1 marks padding)");
  const QuantizedTensor& first = experts.front();
  for (std::size_t e = 0; e < experts.size(); ++e) {
    const QuantizedTensor& b = experts[e];
    if (b.rows != first.rows || b.cols != first.cols || b.config.format != first.config.format ||
        !(b.config.granularity == first.config.granularity) || b.config.scale_rule != first.config.scale_rule)
      refuse("expert " + std::to_string(e) + " differs from expert 0 in shape or quantization");
    if (b.cols != a.cols) refuse("A has K = " + std::to_string(a.cols) + ", the experts K = " + std::to_string(b.cols));
  }
}

QuantizedTensor quantized_rows(const QuantizedTensor& q, std::span<const std::int64_t> rows) {
  const bool per_tensor = q.config.granularity.kind == Granularity::Kind::tensor;
  if (!per_tensor && q.tile_rows != 1)
    throw std::invalid_argument("quantized_rows: scale tiles must be one row high or the whole tensor, not " +
                                q.config.granularity.to_string());
  QuantizedTensor out = q;
  out.rows = static_cast<std::int64_t>(rows.size());
  out.codes.assign(static_cast<std::size_t>(out.rows * q.cols), 0);
  if (!per_tensor) {
    out.scale_rows = out.rows;
    out.scales.assign(static_cast<std::size_t>(out.rows * q.scale_cols), 0.0f);
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const std::int64_t r = rows[i];
    if (r < 0 || r >= q.rows) throw std::invalid_argument("quantized_rows: row " + std::to_string(r) + " outside the tensor");
    std::copy_n(q.codes.begin() + r * q.cols, q.cols, out.codes.begin() + static_cast<std::int64_t>(i) * q.cols);
    if (!per_tensor)
      std::copy_n(q.scales.begin() + r * q.scale_cols, q.scale_cols,
                  out.scales.begin() + static_cast<std::int64_t>(i) * q.scale_cols);
  }
  return out;
}

}  // namespace fp8lab
