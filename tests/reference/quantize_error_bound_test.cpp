// Every dequantized element within the error the quantizer formula allows, derived here:
//
// For x in a tile with scale sf: y = fl32(x * fl32(1/sf)) = (x/sf)(1 + d1)(1 + d2), |d| <= 2^-24,
// q = RNE(y) into a format with M fraction bits and smallest normal 2^emin, x' = fl32(q sf).
//  - |y| >= 2^emin: |q - y| <= 2^-(M+1) |y|       (half an ulp of y's binade)
//  - |y| <  2^emin: |q - y| <= 2^(emin-M-1)        (half the subnormal quantum)
//  (no saturation beyond rounding: sf >= amax / fmt_max up to 2^-24 relative, so
//  |y| <= fmt_max (1 + 2^-22), far below the overflow midpoint.)
// |x' - x| <= sf |q - y| + |x| |(1 + d1)(1 + d2) - 1| + |q sf| 2^-24 + 2^-150 (x' underflowing
// into FP32 subnormals), and with |q sf| <= |x| (1 + 2^-(M+1)) (1 + 2^-23):
//   |x' - x| <= max(2^-(M+1) |x|, sf 2^(emin-M-1)) + 2^-22 |x| + 2^-149.
// The transposed re-quantization rounds twice: |x'' - x| <= bound(x' -> x'') + bound(x -> x').
#include <catch2/catch.hpp>
#include <cmath>

#include "kernels/cpu/quantize.hpp"
#include "kernels/cpu/requantize_transposed.hpp"
#include "tests/support/adversarial_tensors.hpp"
#include "tests/support/format_points.hpp"
#include "tests/support/quantize_cases.hpp"

using namespace fp8lab;

namespace {

double element_bound(double x, double sf, const ref::FormatDefinition& f) {
  const double relative = std::ldexp(std::fabs(x), -(f.mantissa_bits + 1));
  const double subnormal = sf * std::ldexp(1.0, f.min_exponent - f.mantissa_bits - 1);
  return std::max(relative, subnormal) + std::ldexp(std::fabs(x), -22) + std::ldexp(1.0, -149);
}

}  // namespace

TEST_CASE("quantize: every dequantized element is within the derived rounding bound") {
  constexpr std::int64_t kRows = 96, kCols = 640;
  for (const test::FormatCase& format : test::format_cases()) {
    const auto tensors = test::adversarial_tensors(kRows, kCols, format_max(format.kernel), test::midpoints(format.table));
    for (const test::NamedTensor& tensor : tensors)
      for (ScaleRule rule : {ScaleRule::fp32, ScaleRule::pow2})
        for (const char* g : {"tensor", "row", "tile:1x128", "block:32x32"}) {
          DYNAMIC_SECTION(format.reference.name << " " << g << " " << scale_rule_name(rule) << " on " << tensor.name) {
            const QuantizedTensor q = cpu::quantize(tensor.values, kRows, kCols, {format.kernel, Granularity::parse(g), rule});
            const std::vector<float> dq = cpu::dequantize(q);
            std::size_t violations = 0;
            double worst_used = 0;  // largest |error| / bound seen: the budget used
            for (std::int64_t r = 0; r < kRows; ++r)
              for (std::int64_t c = 0; c < kCols; ++c) {
                const auto k = static_cast<std::size_t>(r * kCols + c);
                const double x = tensor.values[k];
                const double bound = element_bound(x, q.scale_of(r, c), format.reference);
                const double error = std::fabs(static_cast<double>(dq[k]) - x);
                worst_used = std::max(worst_used, error / bound);
                if (error > bound && ++violations <= 3)
                  UNSCOPED_INFO("(" << r << ", " << c << ") x = " << x << " x' = " << dq[k] << " error " << error
                                    << " > bound " << bound);
              }
            INFO("largest error / bound = " << worst_used);
            CHECK(violations == 0);
          }
        }
  }
}

TEST_CASE("requantize_transposed: error within the sum of the two rounding bounds") {
  constexpr std::int64_t kRows = 256, kCols = 384;
  for (const test::FormatCase& format : test::format_cases()) {
    const auto tensors = test::adversarial_tensors(kRows, kCols, format_max(format.kernel), test::midpoints(format.table));
    for (const test::NamedTensor& tensor : tensors) {
      DYNAMIC_SECTION(format.reference.name << " tile:1x128 fp32 on " << tensor.name) {
        const QuantizedTensor forward =
            cpu::quantize(tensor.values, kRows, kCols, {format.kernel, Granularity::tile(128), ScaleRule::fp32});
        const std::vector<float> once = cpu::dequantize(forward);
        const QuantizedTensor backward = cpu::requantize_transposed(forward);
        const std::vector<float> twice = cpu::dequantize(backward);  // kCols x kRows
        std::size_t violations = 0;
        for (std::int64_t r = 0; r < kRows; ++r)
          for (std::int64_t c = 0; c < kCols; ++c) {
            const auto k = static_cast<std::size_t>(r * kCols + c), kt = static_cast<std::size_t>(c * kRows + r);
            const double x = tensor.values[k], x1 = once[k], x2 = twice[kt];
            const double bound = element_bound(x, forward.scale_of(r, c), format.reference) +
                                 element_bound(x1, backward.scale_of(c, r), format.reference);
            if (std::fabs(x2 - x) > bound) ++violations;
          }
        CHECK(violations == 0);
      }
    }
  }
}
