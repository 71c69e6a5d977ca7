#pragma once
// The quantizer tests' shared comparison with the FP64 reference (reference/quantize_ref): FP32
// equality of bits (NaN equal to NaN), and one quantized tensor checked against the reference's
// scales, codes, dequantized values and per-tensor scale, the first few mismatches named.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/quantization.hpp"
#include "reference/quantize_ref.hpp"
#include "tests/support/quantize_cases.hpp"

namespace fp8lab::test {

// The same FP32 value, bit for bit (a reference value is an FP32 value held in a double).
inline bool same_float(float a, double b) {
  const float bf = static_cast<float>(b);
  if (std::isnan(a) || std::isnan(bf)) return std::isnan(a) && std::isnan(bf);
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(bf);
}

// q (quantized from `values`, rows x cols row-major) against the reference's r, with q's own
// dequantization `dq`.
inline void check_matches_reference(const QuantizedTensor& q, const std::vector<float>& values,
                                    const std::vector<float>& dq, const ref::QuantizedRef& r) {
  REQUIRE(q.scale_rows == r.scales.rows());
  REQUIRE(q.scale_cols == r.scales.cols());
  CHECK(same_float(q.tensor_scale.decode, r.tensor_scale.decode));
  CHECK(same_float(q.tensor_scale.encode, r.tensor_scale.encode));
  std::size_t scale_mismatches = 0, code_mismatches = 0, dequant_mismatches = 0;
  for (Eigen::Index i = 0; i < r.scales.rows(); ++i)
    for (Eigen::Index j = 0; j < r.scales.cols(); ++j) {
      const float s = q.scales[static_cast<std::size_t>(i * q.scale_cols + j)];
      if (!same_float(s, r.scales(i, j)) && ++scale_mismatches <= 3)
        UNSCOPED_INFO("scale (" << i << ", " << j << ") " << s << ", reference " << r.scales(i, j));
    }
  for (std::int64_t i = 0; i < q.rows; ++i)
    for (std::int64_t j = 0; j < q.cols; ++j) {
      const auto k = static_cast<std::size_t>(i * q.cols + j);
      if (q.codes[k] != r.codes(i, j) && ++code_mismatches <= 3)
        UNSCOPED_INFO("(" << i << ", " << j << ") x = " << values[k] << ": code " << int(q.codes[k]) << ", reference "
                          << r.codes(i, j));
      if (!same_float(dq[k], r.dequantized(i, j))) ++dequant_mismatches;
    }
  CHECK(scale_mismatches == 0);
  CHECK(code_mismatches == 0);
  CHECK(dequant_mismatches == 0);
}

}  // namespace fp8lab::test
