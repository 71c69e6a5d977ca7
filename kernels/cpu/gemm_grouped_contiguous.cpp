#include "kernels/cpu/gemm_grouped_contiguous.hpp"

#include <algorithm>

#include "kernels/cpu/gemm_fp8_nt.hpp"

namespace fp8lab::cpu {

std::vector<float> gemm_grouped_contiguous_nt(const QuantizedTensor& a, std::span<const QuantizedTensor> experts,
                                              std::span<const std::int32_t> block_expert, const GemmConfig& config) {
  check_grouped_contiguous(a, experts, block_expert);
  const std::int64_t n = experts.front().rows;
  std::vector<float> c(static_cast<std::size_t>(a.rows * n), 0.0f);
  for (std::size_t e = 0; e < experts.size(); ++e) {
    GemmOptions options;  // this expert's rows: the GEMM computes only those (same bits per row)
    for (std::size_t block = 0; block < block_expert.size(); ++block)
      if (block_expert[block] == static_cast<std::int32_t>(e))
        for (std::int64_t r = 0; r < kGroupedBlockRows; ++r)
          options.rows.push_back(static_cast<std::int64_t>(block) * kGroupedBlockRows + r);
    if (options.rows.empty()) continue;
    const std::vector<float> rows = gemm_nt(a, experts[e], config, options);
    for (std::size_t i = 0; i < options.rows.size(); ++i)
      std::copy_n(rows.begin() + static_cast<std::int64_t>(i) * n, n, c.begin() + options.rows[i] * n);
  }
  return c;
}

}  // namespace fp8lab::cpu
