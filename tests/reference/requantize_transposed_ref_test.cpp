// Exact tier: the backward re-quantization (1xT -> transposed 1xT, i.e. Tx1 of the
// original) against the FP64 reference, bit for bit.
#include <catch2/catch.hpp>

#include "kernels/cpu/quantize.hpp"
#include "kernels/cpu/requantize_transposed.hpp"
#include "tests/support/adversarial_tensors.hpp"
#include "tests/support/format_points.hpp"
#include "tests/support/quantize_cases.hpp"

using namespace fp8lab;

TEST_CASE("cpu requantize_transposed is bit-identical to the FP64 reference") {
  constexpr std::int64_t kRows = 200, kCols = 300;  // neither a multiple of 128: ragged both ways
  for (const test::FormatCase& format : test::format_cases()) {
    const auto tensors = test::adversarial_tensors(kRows, kCols, format_max(format.kernel), test::midpoints(format.table));
    for (const test::NamedTensor& tensor : tensors)
      for (ScaleRule rule : {ScaleRule::fp32, ScaleRule::pow2})
        for (int tile : {32, 128}) {
          DYNAMIC_SECTION(format.reference.name << " tile:1x" << tile << " " << scale_rule_name(rule) << " on "
                                                << tensor.name) {
            const QuantizedTensor forward =
                cpu::quantize(tensor.values, kRows, kCols, {format.kernel, Granularity::tile(tile), rule});
            const QuantizedTensor backward = cpu::requantize_transposed(forward);

            Eigen::MatrixXd x(kRows, kCols);
            for (std::int64_t r = 0; r < kRows; ++r)
              for (std::int64_t c = 0; c < kCols; ++c) x(r, c) = tensor.values[static_cast<std::size_t>(r * kCols + c)];
            const auto rule_ref = test::reference_rule(rule);
            const ref::QuantizedRef forward_ref = ref::quantize_ref(x, 1, tile, format.reference, rule_ref);
            const ref::QuantizedRef backward_ref =
                ref::requantize_transposed_ref(forward_ref, tile, format.reference, rule_ref);

            REQUIRE(backward.rows == kCols);
            REQUIRE(backward.scale_rows == backward_ref.scales.rows());
            REQUIRE(backward.scale_cols == backward_ref.scales.cols());
            std::size_t mismatches = 0;
            for (std::int64_t i = 0; i < backward.rows; ++i)
              for (std::int64_t j = 0; j < backward.cols; ++j)
                if (backward.codes[static_cast<std::size_t>(i * backward.cols + j)] != backward_ref.codes(i, j))
                  ++mismatches;
            for (Eigen::Index i = 0; i < backward_ref.scales.rows(); ++i)
              for (Eigen::Index j = 0; j < backward_ref.scales.cols(); ++j)
                if (backward.scales[static_cast<std::size_t>(i * backward.scale_cols + j)] !=
                    static_cast<float>(backward_ref.scales(i, j)))
                  ++mismatches;
            CHECK(mismatches == 0);
          }
        }
  }
}
