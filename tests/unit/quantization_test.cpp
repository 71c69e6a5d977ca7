// Granularity parsing, scale-grid geometry (padding visible), and the scale rule edge cases.
#include <catch2/catch.hpp>
#include <bit>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "kernels/cpu/quantize.hpp"
#include "kernels/cpu/requantize_transposed.hpp"

using namespace fp8lab;

TEST_CASE("granularity: parse and print round-trip, bad text says why") {
  for (const char* text : {"tensor", "row", "tile:1x16", "tile:1x128", "tile:1x512", "block:128x128", "block:32x32"})
    CHECK(Granularity::parse(text).to_string() == text);
  CHECK_THROWS_WITH(Granularity::parse("tile:1x100"), Catch::Contains("not a power of two from 16 to 512"));
  CHECK_THROWS_WITH(Granularity::parse("tile:1x1024"), Catch::Contains("not a power of two"));
  CHECK_THROWS_WITH(Granularity::parse("tile:1x8"), Catch::Contains("not a power of two"));
  CHECK_THROWS_WITH(Granularity::parse("tile:2x128"), Catch::Contains("tiles are 1xT"));
  CHECK_THROWS_WITH(Granularity::parse("block:128x64"), Catch::Contains("blocks are square"));
  CHECK_THROWS_WITH(Granularity::parse("tile:1xabc"), Catch::Contains("not a whole number"));
  CHECK_THROWS_WITH(Granularity::parse("col"), Catch::Contains("not one of tensor, row, tile:1xT, block:BxB"));
  CHECK_THROWS_WITH(parse_fp8_format("e3m4"), Catch::Contains("not one of e4m3, e5m2"));
  CHECK_THROWS_WITH(parse_scale_rule("ue8m0"), Catch::Contains("not one of fp32, pow2"));
}

TEST_CASE("scale grid: ceil(rows / tile_rows) x ceil(cols / tile_cols), padding visible") {
  const auto grid = [](Granularity g, std::int64_t rows, std::int64_t cols) {
    const QuantizedTensor q = make_quantized_tensor(rows, cols, {Fp8Format::e4m3, g, ScaleRule::fp32});
    return std::pair{q.scale_rows, q.scale_cols};
  };
  CHECK(grid(Granularity::tensor(), 70, 300) == std::pair<std::int64_t, std::int64_t>{1, 1});
  CHECK(grid(Granularity::row(), 70, 300) == std::pair<std::int64_t, std::int64_t>{70, 1});
  CHECK(grid(Granularity::tile(128), 70, 300) == std::pair<std::int64_t, std::int64_t>{70, 3});
  CHECK(grid(Granularity::tile(128), 70, 256) == std::pair<std::int64_t, std::int64_t>{70, 2});
  CHECK(grid(Granularity::block(128), 70, 300) == std::pair<std::int64_t, std::int64_t>{1, 3});
  CHECK(grid(Granularity::block(32), 70, 300) == std::pair<std::int64_t, std::int64_t>{3, 10});
}

TEST_CASE("tile_scale fp32/pow2: zero tile gets 1, pow2 rounds up, tiny amax is floored at 2^-126, NaN propagates") {
  constexpr ElementTraits e4m3 = element_traits_of<E4M3>();
  const auto sf = [&](float amax, ScaleRule rule) { return tile_scale(amax, rule, e4m3).decode; };
  CHECK(sf(0.0f, ScaleRule::fp32) == 1.0f);
  CHECK(sf(0.0f, ScaleRule::pow2) == 1.0f);
  CHECK(sf(448.0f, ScaleRule::fp32) == 1.0f);
  CHECK(sf(449.0f, ScaleRule::pow2) == 2.0f);
  CHECK(sf(300.0f, ScaleRule::pow2) == 1.0f);
  CHECK(sf(1e-40f, ScaleRule::fp32) == 0x1p-126f);
  CHECK(std::isnan(sf(std::numeric_limits<float>::quiet_NaN(), ScaleRule::fp32)));
  CHECK(tile_scale(300.0f, ScaleRule::fp32, e4m3).encode == 1.0f / (300.0f / 448.0f));  // fl32(1 / sf)
}

TEST_CASE("scale rules: names round-trip, a bad name lists them all, nvfp4 rules take e2m1 only") {
  for (const char* name : {"fp32", "pow2", "deepgemm", "te", "te-pow2", "div", "mx", "mx:ceil", "mx:even", "mx:rceil",
                           "nvfp4", "nvfp4:torchao"})
    CHECK(std::string(scale_rule_name(parse_scale_rule(name))) == name);
  CHECK_THROWS_WITH(parse_scale_rule("mx:floor"),
                    Catch::Contains("not one of fp32, pow2, deepgemm, te, te-pow2, div, mx, mx:ceil, mx:even, "
                                    "mx:rceil, nvfp4, nvfp4:torchao"));
  CHECK_THROWS_WITH(make_quantized_tensor(2, 32, {Fp8Format::e4m3, Granularity::tile(16), ScaleRule::nvfp4}),
                    Catch::Contains("scale rule nvfp4 needs format e2m1, not e4m3"));
  CHECK_NOTHROW(make_quantized_tensor(2, 32, {ElementFormat::Kind::e2m1, Granularity::tile(16), ScaleRule::nvfp4}));
  CHECK(parse_element_format("e3m2") == ElementFormat(ElementFormat::Kind::e3m2));
  CHECK_THROWS_WITH(parse_element_format("e2m2"), Catch::Contains("not one of e4m3, e5m2, e2m1, e3m2, e2m3"));
  CHECK_THROWS_WITH(ElementFormat(ElementFormat::Kind::e2m1).fp8(), Catch::Contains("the promoted (Hopper-model) GEMMs take e4m3, e5m2"));
  CHECK(parse_gemm_scale_rule("mx:rceil") == ScaleRule::mx_rceil);
  CHECK_THROWS_WITH(parse_gemm_scale_rule("nvfp4:torchao"), Catch::Contains("the FP8 GEMMs take one scale per tile"));
}

TEST_CASE("quantize: a NaN poisons its own tile only; the scale of a 1x128 tile with NaN is NaN") {
  std::vector<float> x(2 * 256, 1.0f);
  x[5] = std::numeric_limits<float>::quiet_NaN();
  const QuantizedTensor q = cpu::quantize(x, 2, 256, {Fp8Format::e4m3, Granularity::tile(128), ScaleRule::fp32});
  CHECK(std::isnan(q.scales[0]));
  CHECK(q.scales[1] == 1.0f / 448.0f);
  CHECK((q.codes[5] & 0x7F) == 0x7F);
  CHECK(q.codes[200] == 0x7E);  // 1.0 / (1/448) = 448
}

TEST_CASE("quantize: rejects a value count that does not match the shape") {
  std::vector<float> x(10, 1.0f);
  CHECK_THROWS_WITH(cpu::quantize(x, 3, 4, {}), Catch::Contains("needs 12"));
}

TEST_CASE("requantize_transposed: needs 1xT tiles, returns the transposed geometry") {
  std::vector<float> x(64 * 300, 0.5f);
  const QuantizedTensor rowwise = cpu::quantize(x, 64, 300, {Fp8Format::e4m3, Granularity::row(), ScaleRule::fp32});
  CHECK_THROWS_WITH(cpu::requantize_transposed(rowwise), Catch::Contains("must be quantized with tile:1xT"));
  const QuantizedTensor tiles = cpu::quantize(x, 64, 300, {Fp8Format::e4m3, Granularity::tile(32), ScaleRule::fp32});
  const QuantizedTensor t = cpu::requantize_transposed(tiles);
  CHECK(t.rows == 300);
  CHECK(t.cols == 64);
  CHECK(t.scale_rows == 300);
  CHECK(t.scale_cols == 2);
}

// dequantize_transposed_into decodes transposed codes with transposed scales; oracle: dequantize,
// then the FP32 values transposed. Bit for bit on ragged shapes, for 1xT tiles, 16x16 blocks
// (three block rows over 37 rows: scales that change along the transposed rows), a per-tensor
// scale and NVFP4's two levels (a tensor decode scale besides the block scales).
TEST_CASE("dequantize_transposed_into: the transpose of dequantize, bit for bit") {
  const std::int64_t rows = 37, cols = 300;
  std::vector<float> x(static_cast<std::size_t>(rows * cols));
  std::uint32_t state = 12345;
  for (float& v : x) {
    state = state * 1664525u + 1013904223u;
    v = (static_cast<float>(state >> 8) / 16777216.0f - 0.5f) * static_cast<float>(1 + (state & 7) * 37);
  }
  const std::vector<QuantizeConfig> configs = {{Fp8Format::e4m3, Granularity::tile(128), ScaleRule::fp32},
                                               {Fp8Format::e5m2, Granularity::block(16), ScaleRule::pow2},
                                               {Fp8Format::e4m3, Granularity::tensor(), ScaleRule::fp32},
                                               {ElementFormat(ElementFormat::Kind::e2m1), Granularity::tile(16), ScaleRule::nvfp4}};
  for (const QuantizeConfig& config : configs) {
    INFO(config.granularity.to_string() << " " << scale_rule_name(config.scale_rule));
    const QuantizedTensor q = cpu::quantize(x, rows, cols, config);
    const std::vector<float> plain = cpu::dequantize(q);
    std::vector<float> transposed(plain.size());
    cpu::dequantize_transposed_into(q, transposed);
    std::size_t mismatches = 0;
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c)
        if (std::bit_cast<std::uint32_t>(transposed[static_cast<std::size_t>(c * rows + r)]) !=
            std::bit_cast<std::uint32_t>(plain[static_cast<std::size_t>(r * cols + c)]))
          ++mismatches;
    CHECK(mismatches == 0);
  }
  std::vector<float> short_output(10);
  CHECK_THROWS_WITH(cpu::dequantize_transposed_into(cpu::quantize(x, rows, cols, configs[0]), short_output),
                    Catch::Contains("the output holds 10 values"));
}
