// Exact tier: the CPU quantizer against the FP64 reference quantizer, bit for bit (codes,
// scales, dequantized values), over adversarial data x format x scale rule x granularity.
// 70 x 300 makes every tile size ragged along K (300 is no multiple of 16..512) and every
// block ragged along rows.
#include <catch2/catch.hpp>

#include "kernels/cpu/quantize.hpp"
#include "tests/support/adversarial_tensors.hpp"
#include "tests/support/format_points.hpp"
#include "tests/support/quantize_cases.hpp"

using namespace fp8lab;

namespace {

Eigen::MatrixXd to_matrix(const test::NamedTensor& t) {
  Eigen::MatrixXd m(t.rows, t.cols);
  for (std::int64_t r = 0; r < t.rows; ++r)
    for (std::int64_t c = 0; c < t.cols; ++c) m(r, c) = t.values[static_cast<std::size_t>(r * t.cols + c)];
  return m;
}

}  // namespace

TEST_CASE("cpu quantize is bit-identical to the FP64 reference (codes, scales, dequantized)") {
  constexpr std::int64_t kRows = 70, kCols = 300;
  for (const test::FormatCase& format : test::format_cases()) {
    const auto tensors = test::adversarial_tensors(kRows, kCols, format_max(format.kernel), test::midpoints(format.table));
    for (const test::NamedTensor& tensor : tensors) {
      const Eigen::MatrixXd x = to_matrix(tensor);
      for (ScaleRule rule : {ScaleRule::fp32, ScaleRule::pow2})
        for (const test::GranularityCase& g : test::granularity_cases()) {
          DYNAMIC_SECTION(format.reference.name << " " << g.text << " " << scale_rule_name(rule) << " on "
                                                << tensor.name) {
            const QuantizedTensor q =
                cpu::quantize(tensor.values, kRows, kCols, {format.kernel, Granularity::parse(g.text), rule});
            const std::vector<float> dq = cpu::dequantize(q);
            const ref::QuantizedRef r = ref::quantize_ref(x, g.whole_rows ? kRows : g.tile_rows,
                                                          g.whole_cols ? kCols : g.tile_cols, format.reference,
                                                          test::reference_rule(rule));
            REQUIRE(q.scale_rows == r.scales.rows());
            REQUIRE(q.scale_cols == r.scales.cols());
            std::size_t scale_mismatches = 0, code_mismatches = 0, dequant_mismatches = 0;
            for (Eigen::Index i = 0; i < r.scales.rows(); ++i)
              for (Eigen::Index j = 0; j < r.scales.cols(); ++j)
                if (q.scales[static_cast<std::size_t>(i * q.scale_cols + j)] != static_cast<float>(r.scales(i, j)))
                  ++scale_mismatches;
            for (std::int64_t i = 0; i < kRows; ++i)
              for (std::int64_t j = 0; j < kCols; ++j) {
                const auto k = static_cast<std::size_t>(i * kCols + j);
                if (q.codes[k] != r.codes(i, j) && ++code_mismatches <= 3)
                  UNSCOPED_INFO("(" << i << ", " << j << ") x = " << tensor.values[k] << ": code "
                                    << int(q.codes[k]) << ", reference " << r.codes(i, j));
                if (dq[k] != static_cast<float>(r.dequantized(i, j))) ++dequant_mismatches;
              }
            CHECK(scale_mismatches == 0);
            CHECK(code_mismatches == 0);
            CHECK(dequant_mismatches == 0);
          }
        }
    }
  }
}
