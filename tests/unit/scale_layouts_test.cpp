// cuBLASLt scale layouts: every scale lands at the index the layout definition gives, and
// the wrong granularity is refused with the reason.
#include <catch2/catch.hpp>

#include "kernels/scale_layouts.hpp"

using namespace fp8lab;

namespace {

// A quantized tensor whose scale (r, l) is the distinctive value 1000 r + l.
QuantizedTensor labelled(std::int64_t rows, std::int64_t cols, Granularity g) {
  QuantizedTensor q = make_quantized_tensor(rows, cols, {Fp8Format::e4m3, g, ScaleRule::fp32});
  for (std::int64_t r = 0; r < q.scale_rows; ++r)
    for (std::int64_t l = 0; l < q.scale_cols; ++l)
      q.scales[static_cast<std::size_t>(r * q.scale_cols + l)] = static_cast<float>(1000 * r + l);
  return q;
}

}  // namespace

TEST_CASE("VEC128_32F scales: rows fastest, index l * R + r") {
  const QuantizedTensor q = labelled(5, 300, Granularity::tile(128));  // L = 3
  const std::vector<float> v = vec128_scales_rows_fastest(q);
  REQUIRE(v.size() == 15);
  for (int r = 0; r < 5; ++r)
    for (int l = 0; l < 3; ++l) CHECK(v[static_cast<std::size_t>(l * 5 + r)] == static_cast<float>(1000 * r + l));
  CHECK_THROWS_WITH(vec128_scales_rows_fastest(labelled(5, 300, Granularity::row())), Catch::Contains("need tile:1x128"));
}

TEST_CASE("BLK128x128_32F scales: K fastest with the K extent padded to a multiple of 4") {
  const QuantizedTensor q = labelled(300, 700, Granularity::block(128));  // 3 row blocks, L = 6, L4 = 8
  CHECK(blk128x128_padded_k_blocks(700) == 8);
  CHECK(blk128x128_padded_k_blocks(512) == 4);
  CHECK(blk128x128_padded_k_blocks(513) == 8);
  const std::vector<float> v = blk128x128_scales_k_fastest(q);
  REQUIRE(v.size() == 3 * 8);
  for (int rb = 0; rb < 3; ++rb) {
    for (int l = 0; l < 6; ++l) CHECK(v[static_cast<std::size_t>(rb * 8 + l)] == static_cast<float>(1000 * rb + l));
    CHECK(v[static_cast<std::size_t>(rb * 8 + 6)] == 1.0f);  // padding
    CHECK(v[static_cast<std::size_t>(rb * 8 + 7)] == 1.0f);
  }
  CHECK_THROWS_WITH(blk128x128_scales_k_fastest(labelled(300, 700, Granularity::block(64))),
                    Catch::Contains("need block:128x128"));
}
