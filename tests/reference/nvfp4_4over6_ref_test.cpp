// Exact tier for nvfp4:4over6 (kernels/nvfp4_4over6.hpp): the CPU quantizer against the FP64
// reference (reference/nvfp4_4over6_ref) bit for bit (codes, E4M3 block scales, the per-tensor
// scale, dequantized values) on random, outlier-channel, all-zero, subnormal-range, tie-valued
// and mixed-sign tensors, 1x16 and 16x16 blocks, ragged edges; and that both candidates occur.
#include <catch2/catch.hpp>
#include <algorithm>
#include <bit>
#include <cmath>

#include "kernels/cpu/quantize.hpp"
#include "reference/nvfp4_4over6_ref.hpp"
#include "tests/support/adversarial_tensors.hpp"
#include "tests/support/format_points.hpp"

using namespace fp8lab;

namespace {

bool same_float(float a, double b) {
  const float bf = static_cast<float>(b);
  if (std::isnan(a) || std::isnan(bf)) return std::isnan(a) && std::isnan(bf);
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(bf);
}

}  // namespace

TEST_CASE("cpu quantize nvfp4:4over6 equals the FP64 reference (1x16 and 16x16 blocks, ragged)") {
  constexpr std::int64_t kRows = 40, kCols = 100;  // 40 = 2.5 blocks of 16 rows, 100 = 6.25 of 16 columns
  std::vector<test::NamedTensor> tensors = test::adversarial_tensors(kRows, kCols, 6.0f, test::midpoints(test::kE2M1Table));
  {  // Blocks near the map-to-4 / map-to-6 tie: values on E2M1 points scaled by 2/3 and by 1.
    std::vector<float> x = test::gaussian(kRows, kCols, 9);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::round(x[i] * 2.0f) * ((i / 16) % 2 ? 1.0f : 2.0f / 3.0f);
    tensors.push_back({"E2M1 grid values", kRows, kCols, x});
  }
  for (const test::NamedTensor& tensor : tensors) {
    Eigen::MatrixXd x(kRows, kCols);
    for (std::int64_t r = 0; r < kRows; ++r)
      for (std::int64_t c = 0; c < kCols; ++c) x(r, c) = tensor.values[static_cast<std::size_t>(r * kCols + c)];
    for (const char* granularity : {"tile:1x16", "block:16x16"}) {
      DYNAMIC_SECTION(granularity << " on " << tensor.name) {
        const QuantizeConfig config{ElementFormat::Kind::e2m1, Granularity::parse(granularity), ScaleRule::nvfp4_4over6};
        const QuantizedTensor q = cpu::quantize(tensor.values, kRows, kCols, config);
        const std::vector<float> dq = cpu::dequantize(q);
        const ref::QuantizedRef r = ref::quantize_nvfp4_4over6_ref(x, q.tile_rows, q.tile_cols);
        REQUIRE(q.scale_rows == r.scales.rows());
        REQUIRE(q.scale_cols == r.scales.cols());
        CHECK(same_float(q.tensor_scale.encode, r.tensor_scale.encode));
        CHECK(same_float(q.tensor_scale.decode, r.tensor_scale.decode));
        std::size_t scale_mismatches = 0, code_mismatches = 0, dequant_mismatches = 0;
        for (Eigen::Index i = 0; i < r.scales.rows(); ++i)
          for (Eigen::Index j = 0; j < r.scales.cols(); ++j) {
            const float s = q.scales[static_cast<std::size_t>(i * q.scale_cols + j)];
            if (!same_float(s, r.scales(i, j)) && ++scale_mismatches <= 3)
              UNSCOPED_INFO("block (" << i << ", " << j << ") scale " << s << ", reference " << r.scales(i, j));
          }
        for (std::int64_t i = 0; i < kRows; ++i)
          for (std::int64_t j = 0; j < kCols; ++j) {
            const auto k = static_cast<std::size_t>(i * kCols + j);
            if (q.codes[k] != r.codes(i, j) && ++code_mismatches <= 3)
              UNSCOPED_INFO("(" << i << ", " << j << ") x = " << tensor.values[k] << ": code " << int(q.codes[k])
                                << ", reference " << r.codes(i, j));
            if (!same_float(dq[k], r.dequantized(i, j))) ++dequant_mismatches;
          }
        CHECK(scale_mismatches == 0);
        CHECK(code_mismatches == 0);
        CHECK(dequant_mismatches == 0);
      }
    }
  }
}

TEST_CASE("nvfp4:4over6 keeps the map-to-4 scale in some blocks and the map-to-6 scale in others (gaussian data)") {
  // Not vacuous: a rule that always kept one candidate would pass the comparison above only if
  // the reference made the same mistake; on gaussian data both occur (the paper: about 1 in 3).
  constexpr std::int64_t kRows = 64, kCols = 256;
  const std::vector<float> x = test::gaussian(kRows, kCols, 4);
  const QuantizedTensor q = cpu::quantize(x, kRows, kCols, {ElementFormat::Kind::e2m1, Granularity::tile(16),
                                                            ScaleRule::nvfp4_4over6});
  std::size_t map4 = 0;
  for (std::int64_t r = 0; r < kRows; ++r)
    for (std::int64_t b = 0; b < kCols / 16; ++b) {
      float amax = 0.0f;
      for (std::int64_t c = b * 16; c < (b + 1) * 16; ++c) amax = std::max(amax, std::fabs(x[static_cast<std::size_t>(r * kCols + c)]));
      const auto candidates = scale_detail::nvfp4_4over6_candidates(amax, element_traits_of<E2M1>(), q.tensor_scale);
      const float kept = q.scales[static_cast<std::size_t>(r * q.scale_cols + b)];
      REQUIRE((kept == candidates.map4.decode || kept == candidates.map6.decode));
      map4 += kept == candidates.map4.decode;
    }
  const std::size_t blocks = static_cast<std::size_t>(kRows * kCols / 16);
  INFO(map4 << " of " << blocks << " blocks kept the map-to-4 scale");
  CHECK(map4 > 0);
  CHECK(map4 < blocks);
}
