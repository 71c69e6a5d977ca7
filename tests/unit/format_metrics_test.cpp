// harness/metrics/format_metrics: clipped blocks and code differences on hand-built tensors,
// every expected count derived in the comments from the rules' definitions
// (kernels/scale_rules.hpp) and the formats' value grids, not from running the code.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "harness/metrics/format_metrics.hpp"
#include "kernels/cpu/quantize.hpp"

namespace fp8lab {
namespace {

QuantizeConfig config(ElementFormat format, Granularity g, ScaleRule rule, Rounding rounding = {}) {
  return {format, g, rule, rounding};
}

// One row of 16-element tiles: tile i holds maxima[i] in its first element and `rest` after.
std::vector<float> tiles_with_maxima(const std::vector<float>& maxima, float rest) {
  std::vector<float> x;
  for (const float m : maxima) {
    x.push_back(m);
    for (int i = 1; i < 16; ++i) x.push_back(m == 0.0f ? 0.0f : rest);
  }
  return x;
}

BlockClipCounts clips_of(const std::vector<float>& x, std::int64_t rows, const QuantizeConfig& c) {
  const std::int64_t cols = static_cast<std::int64_t>(x.size()) / rows;
  return block_clip_counts(x, cpu::quantize(x, rows, cols, c));
}

}  // namespace

TEST_CASE("block clip counts: E4M3 under OCP FLOOR (mx), 1x16 tiles", "[format_metrics]") {
  // mx: X = 2^(floor(log2 amax) - 8); every maximum below is in [1, 2), so X = 2^-8, encode =
  // 2^8 and s = 256 amax exactly. E4M3's max 448 = 1.110b x 2^8, ulp there 2^(8-3) = 32, the
  // next grid value 480, the midpoint 464; 448 / 32 = 14 is even, so 464 ties down to 448.
  //   1.75       s = 448        not over max, not clipped (exactly the max)
  //   1.8125     s = 464        over max, not clipped (RNE gives 448 anyway)
  //   1.81640625 s = 465        over max, clipped (RNE would give 480)
  //   1.99       s = 509.44     over max, clipped
  //   0          an all-zero tile: not counted
  //   1.5        s = 384        neither
  // blocks 5, over_max 3, clipped 2.
  const std::vector<float> x = tiles_with_maxima({1.75f, 1.8125f, 1.81640625f, 1.99f, 0.0f, 1.5f}, 0.25f);
  const BlockClipCounts c = clips_of(x, 1, config(Fp8Format::e4m3, Granularity::tile(16), ScaleRule::mx));
  CHECK(c.blocks == 5);
  CHECK(c.over_max == 3);
  CHECK(c.clipped == 2);
  CHECK(c.clipped_fraction() == 0.4);
  CHECK(c.over_max_fraction() == 0.6);

  // mx:rceil: X = 2^ceil(log2(fl32(amax * fl32(1/448)))) >= amax / 448 up to one FP32 rounding,
  // which for these maxima leaves s <= 448 (1.75: d is within an ulp of 2^-8, either side gives
  // s <= 448): nothing over max, nothing clipped.
  const BlockClipCounts r = clips_of(x, 1, config(Fp8Format::e4m3, Granularity::tile(16), ScaleRule::mx_rceil));
  CHECK(r.blocks == 5);
  CHECK(r.over_max == 0);
  CHECK(r.clipped == 0);
}

TEST_CASE("block clip counts: E2M1 under FLOOR, where the tie at the midpoint clips", "[format_metrics]") {
  // mx on E2M1: X = 2^(floor(log2 amax) - 2) = 2^-2 for amax in [1, 2), s = 4 amax. E2M1's max
  // 6 = 1.1b x 2^2, ulp 2^(2-1) = 2, next grid value 8, midpoint 7; 6 / 2 = 3 is odd, so a tie
  // at 7 goes to the even 8: clipped.
  //   1.5    s = 6     neither
  //   1.625  s = 6.5   over max, not clipped (nearest is 6)
  //   1.75   s = 7     over max, clipped (the tie)
  //   1.875  s = 7.5   over max, clipped
  // blocks 4, over_max 3, clipped 2.
  const std::vector<float> x = tiles_with_maxima({1.5f, 1.625f, 1.75f, 1.875f}, 0.5f);
  const BlockClipCounts c = clips_of(x, 1, config(ElementFormat::Kind::e2m1, Granularity::tile(16), ScaleRule::mx));
  CHECK(c.blocks == 4);
  CHECK(c.over_max == 3);
  CHECK(c.clipped == 2);
}

TEST_CASE("block clip counts: torchao's EVEN still clips on E4M3, whose largest significand is 1.75", "[format_metrics]") {
  // mx:even adds half an ulp of a 3-bit mantissa (2^-4) to amax's significand m, truncates to 3
  // bits, then takes FLOOR's exponent. E4M3's max is 1.75 x 2^8 (0x7F is NaN), not 1.875 x 2^8, so
  // m in (1.8125, 1.9375) keeps the exponent and is still scaled past the midpoint 464:
  //   1.8125  m + 1/16 = 1.875 -> X = 2^-8, s = 464     over max, not clipped (ties to 448)
  //   1.875   m + 1/16 = 1.9375 -> 1.875, X = 2^-8, s = 480   over max, clipped
  //   1.9375  m + 1/16 = 2 -> exponent + 1, X = 2^-7, s = 248 neither
  // blocks 3, over_max 2, clipped 1.
  const std::vector<float> x = tiles_with_maxima({1.8125f, 1.875f, 1.9375f}, 0.25f);
  const BlockClipCounts c = clips_of(x, 1, config(Fp8Format::e4m3, Granularity::tile(16), ScaleRule::mx_even));
  CHECK(c.blocks == 3);
  CHECK(c.over_max == 2);
  CHECK(c.clipped == 1);
}

TEST_CASE("block clip counts: the definition is the scaled maximum's, whatever the rounding", "[format_metrics]") {
  // E4M3, mx, s = 256 amax as above: 1.8125 gives s = 464, above max (stochastic rounding
  // saturates it, whatever the draw) but not clipped (RNE gives 448). blocks 3, over_max 1 and
  // clipped 0 under both roundings; the stochastic codes still come from the stochastic quantizer.
  const std::vector<float> x = tiles_with_maxima({1.75f, 1.8125f, 1.5f}, 0.25f);
  const QuantizeConfig nearest = config(Fp8Format::e4m3, Granularity::tile(16), ScaleRule::mx);
  const QuantizeConfig stochastic =
      config(Fp8Format::e4m3, Granularity::tile(16), ScaleRule::mx, {RoundingMode::stochastic, 7});
  const BlockClipCounts n = clips_of(x, 1, nearest), s = clips_of(x, 1, stochastic);
  CHECK((n.blocks == 3 && n.over_max == 1 && n.clipped == 0));
  CHECK((s.blocks == 3 && s.over_max == 1 && s.clipped == 0));
}

TEST_CASE("block clip counts: 16x16 blocks find the maximum in any row", "[format_metrics]") {
  // 32 x 32, block:16x16, E4M3, mx; every element 1.0 (s = 256) except:
  //   block (0,1): 1.99 at (5, 20)   -> s = 509.44, clipped
  //   block (1,0): all zero          -> not counted
  //   block (1,1): 1.8125 at (31, 31) -> s = 464, over max, not clipped
  // blocks 3, over_max 2, clipped 1.
  std::vector<float> x(32 * 32, 1.0f);
  for (int r = 16; r < 32; ++r)
    for (int c = 0; c < 16; ++c) x[static_cast<std::size_t>(r * 32 + c)] = 0.0f;
  x[5 * 32 + 20] = 1.99f;
  x[31 * 32 + 31] = 1.8125f;
  const BlockClipCounts c = clips_of(x, 32, config(Fp8Format::e4m3, Granularity::block(16), ScaleRule::mx));
  CHECK(c.blocks == 3);
  CHECK(c.over_max == 2);
  CHECK(c.clipped == 1);
}

TEST_CASE("block clip counts: a stored scale the rule does not give is refused", "[format_metrics]") {
  const std::vector<float> x = tiles_with_maxima({1.5f}, 0.25f);
  QuantizedTensor q = cpu::quantize(x, 1, 16, config(Fp8Format::e4m3, Granularity::tile(16), ScaleRule::mx));
  q.scales[0] *= 2.0f;  // not what FLOOR gives for amax 1.5
  CHECK_THROWS_AS(block_clip_counts(x, q), std::logic_error);
  CHECK_THROWS_AS(block_clip_counts(std::vector<float>(15, 1.0f), q), std::invalid_argument);
}

TEST_CASE("block clip counts: every rule's scale is recomputed as the quantizer stored it", "[format_metrics]") {
  // Not a count: the consistency check inside block_clip_counts must pass for every rule that
  // serves the format (a disagreement throws std::logic_error), including nvfp4:4over6's choice.
  std::vector<float> x(32 * 64);
  for (std::size_t i = 0; i < x.size(); ++i)
    x[i] = std::ldexp(std::sin(0.37f * static_cast<float>(i)), static_cast<int>(i % 11) - 5);
  for (const ScaleRule rule : {ScaleRule::fp32, ScaleRule::pow2, ScaleRule::deepgemm, ScaleRule::te, ScaleRule::te_pow2,
                               ScaleRule::div, ScaleRule::mx, ScaleRule::mx_ceil, ScaleRule::mx_even,
                               ScaleRule::mx_rceil, ScaleRule::nvfp4, ScaleRule::nvfp4_torchao,
                               ScaleRule::nvfp4_4over6}) {
    CAPTURE(scale_rule_name(rule));
    const BlockClipCounts c = clips_of(x, 32, config(ElementFormat::Kind::e2m1, Granularity::block(16), rule));
    CHECK(c.blocks == 8);
  }
}

TEST_CASE("code difference: mx against mx:rceil on E4M3", "[format_metrics]") {
  // 1 x 32, two 1x16 tiles.
  //   tile 0: 300, 2, zeros. FLOOR: floor(log2 300) = 8, X = 2^0 = 1. RCEIL: 300 / 448 = 0.67
  //           rounds up to X = 1. Same scale, same codes.
  //   tile 1: 500, 3, zeros. FLOOR: X = 1, s = 500 > 464 -> 448. RCEIL: 500 / 448 = 1.12 -> X = 2,
  //           s = 250 -> 256 (E4M3 spacing 16 in [128, 256): 240 or 256, 256 nearer), value 512.
  //           Element 3: FLOOR s = 3 (value 3); RCEIL s = 1.5 (value 1.5 x 2 = 3): the codes
  //           differ, the values do not. The zeros agree.
  // codes differ 2 / 32, values 1 / 32, scales 1 / 2 tiles.
  std::vector<float> x(32, 0.0f);
  x[0] = 300.0f, x[1] = 2.0f, x[16] = 500.0f, x[17] = 3.0f;
  const QuantizedTensor floor = cpu::quantize(x, 1, 32, config(Fp8Format::e4m3, Granularity::tile(16), ScaleRule::mx));
  const QuantizedTensor rceil =
      cpu::quantize(x, 1, 32, config(Fp8Format::e4m3, Granularity::tile(16), ScaleRule::mx_rceil));
  const std::vector<float> fv = cpu::dequantize(floor), rv = cpu::dequantize(rceil);
  REQUIRE(fv[16] == 448.0f);
  REQUIRE(rv[16] == 512.0f);
  const CodeDifference d = code_difference(floor, fv, rceil, rv);
  CHECK((d.elements == 32 && d.codes == 2 && d.values == 1 && d.tiles == 2 && d.scales == 1));
  CHECK(d.code_fraction() == 2.0 / 32);
  CHECK(d.value_fraction() == 1.0 / 32);
  CHECK(d.scale_fraction() == 0.5);
  const CodeDifference same = code_difference(floor, fv, floor, fv);
  CHECK((same.codes == 0 && same.values == 0 && same.scales == 0));
}

TEST_CASE("code difference: fp32 against pow2 scales on E4M3", "[format_metrics]") {
  // One 1x16 tile, amax 7 (elements 7, 1, zeros). fp32: sf = 7 / 448 = 1/64 exactly, q = x * 64:
  // 448 and 64, both exact codes. pow2: 1/64 is a power of two already, so the same scale and the
  // same codes. A second tile with amax 6: fp32 sf = fl32(6 / 448), encode fl32(448 / 6)-ish, so
  // 6 -> 448 and 1 -> 74.67 -> 72 (spacing 8 in [64, 128)); pow2 rounds sf up to 1/64 -> 6 -> 384,
  // 1 -> 64: both codes differ, and the scales differ.
  // codes differ 2 / 32, scales 1 / 2.
  std::vector<float> x(32, 0.0f);
  x[0] = 7.0f, x[1] = 1.0f, x[16] = 6.0f, x[17] = 1.0f;
  const QuantizedTensor a = cpu::quantize(x, 1, 32, config(Fp8Format::e4m3, Granularity::tile(16), ScaleRule::fp32));
  const QuantizedTensor b = cpu::quantize(x, 1, 32, config(Fp8Format::e4m3, Granularity::tile(16), ScaleRule::pow2));
  const CodeDifference d = code_difference(a, cpu::dequantize(a), b, cpu::dequantize(b));
  CHECK((d.codes == 2 && d.scales == 1));
}

TEST_CASE("code difference: quantizations of other shapes or tiles are refused", "[format_metrics]") {
  const std::vector<float> x(32, 1.0f);
  const QuantizedTensor a = cpu::quantize(x, 1, 32, config(Fp8Format::e4m3, Granularity::tile(16), ScaleRule::mx));
  const QuantizedTensor b = cpu::quantize(x, 1, 32, config(Fp8Format::e4m3, Granularity::tile(32), ScaleRule::mx));
  const QuantizedTensor c = cpu::quantize(x, 1, 32, config(Fp8Format::e5m2, Granularity::tile(16), ScaleRule::mx));
  const std::vector<float> av = cpu::dequantize(a);
  CHECK_THROWS_AS(code_difference(a, av, b, cpu::dequantize(b)), std::invalid_argument);
  CHECK_THROWS_AS(code_difference(a, av, c, cpu::dequantize(c)), std::invalid_argument);
}

}  // namespace fp8lab
