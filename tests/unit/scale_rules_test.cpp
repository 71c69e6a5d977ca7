// Worked cases of the scale rules (kernels/scale_rules.hpp), each from its source: the numbers
// a reader can check by hand. The sweep against the FP64 reference is
// tests/reference/scale_rules_ref_test.cpp.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/quantize.hpp"

using namespace fp8lab;

namespace {

constexpr ElementTraits kE4M3 = element_traits_of<E4M3>();
constexpr ElementTraits kE2M1 = element_traits_of<E2M1>();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kFltMax = std::numeric_limits<float>::max();

float decode_of(float amax, ScaleRule rule, ElementTraits f = kE4M3) { return tile_scale(amax, rule, f).decode; }

}  // namespace

TEST_CASE("mx rules: amax 150 in E4M3 gives E8M0 126 under RCEIL and 127 under ceil (pytorch/ao#2035)") {
  CHECK(decode_of(150.0f, ScaleRule::mx_rceil) == 0.5f);  // byte 126
  CHECK(decode_of(150.0f, ScaleRule::mx_ceil) == 1.0f);   // byte 127
  CHECK(decode_of(150.0f, ScaleRule::mx) == 0.5f);        // floor(log2 150) - 8 = -1
  CHECK(decode_of(0x1.fp8f, ScaleRule::mx_even) == 2.0f);  // 1.9375 2^8 rounds to 2^9 at 3 bits: 9 - 8
  CHECK(decode_of(0x1.ep8f, ScaleRule::mx_even) == 1.0f);  // 1.875 = 1.111b holds in 3 bits: kept
  CHECK(decode_of(448.0f, ScaleRule::mx_even) == 1.0f);    // 1.75 2^8 holds in 3 bits: kept
}

TEST_CASE("mx rules: zero amax gives 2^-127 (byte 0), NaN and inf give the NaN scale, exponents clamp at -127") {
  for (ScaleRule rule : {ScaleRule::mx, ScaleRule::mx_ceil, ScaleRule::mx_even, ScaleRule::mx_rceil}) {
    INFO(scale_rule_name(rule));
    CHECK(decode_of(0.0f, rule) == 0x1p-127f);
    // byte 0's element factor is the libraries', not 1 / 2^-127: torchao's FLOOR/CEIL/EVEN divide
    // by max(X, 2^-126), TE's and torchao's RCEIL multiply by 1 (exp2f_rcp)
    const float byte0_factor = rule == ScaleRule::mx_rceil ? 1.0f : 0x1p126f;
    CHECK(tile_scale(0.0f, rule, kE4M3).encode == byte0_factor);
    CHECK(tile_scale(1e-40f, rule, kE4M3).encode == byte0_factor);
    CHECK(tile_scale(0x1p-100f, rule, kE4M3).encode == 1.0f / decode_of(0x1p-100f, rule));  // other bytes: 1 / X
    CHECK(std::isnan(decode_of(kNaN, rule)));
    CHECK(std::isnan(decode_of(kInf, rule)));
    CHECK(decode_of(1e-40f, rule) == 0x1p-127f);
    CHECK(decode_of(kFltMax, rule, kE2M1) <= 0x1p126f);  // no finite amax reaches the top byte
  }
}

TEST_CASE("mx FLOOR clips a block maximum whose significand is >= 1.75 to 448; RCEIL does not") {
  std::vector<float> x(32, 1.0f);
  x[7] = 0x1.fp10f;  // significand 1.9375: FLOOR's scale 2^(10 - 8) puts it at 496 > 448
  const QuantizedTensor floor = cpu::quantize(x, 1, 32, {Fp8Format::e4m3, Granularity::tile(32), ScaleRule::mx});
  CHECK(floor.scales[0] == 4.0f);
  CHECK(floor.codes[7] == 0x7E);  // 448: the block maximum clipped to 1792 on dequantization
  CHECK(cpu::dequantize(floor)[7] == 1792.0f);
  const QuantizedTensor rceil = cpu::quantize(x, 1, 32, {Fp8Format::e4m3, Granularity::tile(32), ScaleRule::mx_rceil});
  CHECK(rceil.scales[0] == 8.0f);
  CHECK(rceil.codes[7] == 0x78);                 // 248 ties between 240 and 256: to 256 (even)
  CHECK(cpu::dequantize(rceil)[7] == 2048.0f);
}

TEST_CASE("te rules: scale = fmt_max / amax, stored scale_inv; amax 0, inf, NaN give 1; tiny amax gives FLT_MAX") {
  CHECK(tile_scale(448.0f, ScaleRule::te, kE4M3).encode == 1.0f);
  CHECK(tile_scale(300.0f, ScaleRule::te, kE4M3).encode == 448.0f / 300.0f);
  CHECK(tile_scale(300.0f, ScaleRule::te, kE4M3).decode == 1.0f / (448.0f / 300.0f));
  CHECK(tile_scale(300.0f, ScaleRule::te_pow2, kE4M3).encode == 1.0f);  // 1.49 masked to 1
  CHECK(tile_scale(100.0f, ScaleRule::te_pow2, kE4M3).encode == 4.0f);  // 4.48 masked to 4
  for (float amax : {0.0f, kInf, kNaN}) {
    CHECK(tile_scale(amax, ScaleRule::te, kE4M3).encode == 1.0f);
    CHECK(tile_scale(amax, ScaleRule::te, kE4M3).decode == 1.0f);
  }
  CHECK(tile_scale(1e-45f, ScaleRule::te, kE4M3).encode == kFltMax);
  CHECK(tile_scale(1e-45f, ScaleRule::te_pow2, kE4M3).encode == 0x1p127f);
}

TEST_CASE("deepgemm: amax clamped below at 1e-4, no zero-tile special case; div divides") {
  CHECK(decode_of(0.0f, ScaleRule::deepgemm) == 1e-4f / 448.0f);
  CHECK(decode_of(1e-6f, ScaleRule::deepgemm) == 1e-4f / 448.0f);
  CHECK(tile_scale(300.0f, ScaleRule::deepgemm, kE4M3).encode == 1.0f / (300.0f / 448.0f));
  CHECK(tile_scale(300.0f, ScaleRule::div, kE4M3).encode == 300.0f / 448.0f);
  CHECK(scale_rule_math(ScaleRule::div).apply == ApplyScale::divide);
}

TEST_CASE("nvfp4: S_enc = 448 * 6 / tensor amax; block scale E4M3(amax * S_enc / 6); zero tensor gives 1") {
  const TensorScale t = tensor_scale(2688.0f, ScaleRule::nvfp4, kE2M1);
  CHECK(t.encode == 1.0f);
  CHECK(tile_scale(6.0f, ScaleRule::nvfp4, kE2M1, t).decode == 1.0f);   // 6 * fl32(1/6) rounds to 1
  CHECK(tile_scale(6.0f, ScaleRule::nvfp4, kE2M1, t).encode == 1.0f);
  CHECK(tile_scale(0.0f, ScaleRule::nvfp4, kE2M1, t).decode == 0.0f);   // s_b = 0 ...
  CHECK(tile_scale(0.0f, ScaleRule::nvfp4, kE2M1, t).encode == kFltMax);  // ... enc = min(1 / 0, FLT_MAX)
  CHECK(tensor_scale(0.0f, ScaleRule::nvfp4, kE2M1).encode == 1.0f);
  CHECK(tensor_scale(kInf, ScaleRule::nvfp4, kE2M1).encode == 1.0f);
  CHECK(tensor_scale(1e-42f, ScaleRule::nvfp4, kE2M1).encode == kFltMax);
  CHECK(tensor_scale(0.0f, ScaleRule::nvfp4_torchao, kE2M1).decode == 1.0f);
  CHECK(tensor_scale(2688.0f, ScaleRule::nvfp4_torchao, kE2M1).decode == 1.0f);
  CHECK(tensor_scale(2688.0f, ScaleRule::nvfp4_torchao, kE2M1).encode == 1.0f);
  // torchao's arithmetic down to a per-tensor scale of 0 (amax / 2688 underflows) ...
  CHECK(tensor_scale(1e-42f, ScaleRule::nvfp4_torchao, kE2M1).decode == 0.0f);
  CHECK(tensor_scale(1e-42f, ScaleRule::nvfp4_torchao, kE2M1).encode == kInf);
  // ... where a nonzero block saturates (s = inf -> 448) and an all-zero one takes the lower
  // clamp instead of torchao's 0 / 0 = NaN (fp8lab's choice): both scales finite
  CHECK(tile_scale(1e-42f, ScaleRule::nvfp4_torchao, kE2M1, {kInf, 0.0f}).decode == 448.0f);
  CHECK(tile_scale(0.0f, ScaleRule::nvfp4_torchao, kE2M1, {kInf, 0.0f}).decode == 0x1p-6f);
  // torchao 0.18 multiplies by fl32(fl32(1 / per-tensor scale) / s_b)
  CHECK(tile_scale(3.0f, ScaleRule::nvfp4_torchao, kE2M1, {4.0f, 0.25f}).encode == 4.0f / 2.0f);
  // torchao clamps block scales to [2^-6, 448]: a tiny block still gets E4M3's smallest normal.
  CHECK(tile_scale(1e-3f, ScaleRule::nvfp4_torchao, kE2M1, {1.0f, 1.0f}).decode == 0x1p-6f);

  std::vector<float> x(32, 0.0f);
  x[0] = 2688.0f;  // tensor amax: S_enc = 1
  x[16] = 3.0f;    // second block: s_b = E4M3(3 / 6) = 0.5, q = E2M1(3 / 0.5) = 6
  const QuantizedTensor q = cpu::quantize(x, 1, 32, {ElementFormat::Kind::e2m1, Granularity::tile(16), ScaleRule::nvfp4});
  CHECK(q.tensor_scale.encode == 1.0f);
  CHECK(q.tensor_amax == 2688.0f);
  CHECK(q.scales[0] == 448.0f);
  CHECK(q.scales[1] == 0.5f);
  CHECK(q.codes[0] == 0x7);
  CHECK(q.codes[16] == 0x7);
  CHECK(cpu::dequantize(q)[16] == 3.0f);
}

TEST_CASE("the rules differ where the libraries differ: div and te move codes that sit on E4M3 ties") {
  // Each 1x16 tile holds amax and x = fl32(m * sf) for an E4M3 midpoint m: x / sf, x * fl32(1 / sf)
  // and x * fl32(448 / amax) fall on different sides of the tie often enough to see.
  std::vector<float> x;
  for (int a = 0; a < 64; ++a) {
    const float amax = 300.0f + 1.37f * static_cast<float>(a);
    const float sf = amax / 448.0f;
    for (float m = 8.5f; m < 16.0f; m += 1.0f) {  // E4M3 steps by 1 in [8, 16): 8.5, 9.5, ... are ties
      std::vector<float> tile(16, 0.0f);
      tile[0] = amax;
      tile[1] = m * sf;
      x.insert(x.end(), tile.begin(), tile.end());
    }
  }
  const std::int64_t rows = static_cast<std::int64_t>(x.size()) / 16;
  const auto codes = [&](ScaleRule rule) {
    return cpu::quantize(x, rows, 16, {Fp8Format::e4m3, Granularity::tile(16), rule}).codes;
  };
  const std::vector<std::uint8_t> fp32 = codes(ScaleRule::fp32), div = codes(ScaleRule::div), te = codes(ScaleRule::te);
  std::size_t div_differs = 0, te_differs = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    div_differs += fp32[i] != div[i];
    te_differs += fp32[i] != te[i];
  }
  INFO("div differs in " << div_differs << ", te in " << te_differs << " of " << x.size() << " codes");
  CHECK(div_differs > 0);
  CHECK(te_differs > 0);
}

TEST_CASE("nvfp4:4over6: worked blocks (TE defaults: MAE, E4M3 bound 256); map-to-4 wins [3, 2.25], map-to-6 wins [6, 4]") {
  // Tensor amax 3: S_enc = 1536 / 3 = 512; base = fl32(3 / 6) * 512 = 256; s6 = 256, s4 = E4M3(384) = 384.
  // map-to-6: 2.25 * 2 = 4.5 ties to 4, dequantized 2 (error 0.25); map-to-4: 2.25 * 4/3 = 3 exactly (error 0).
  std::vector<float> x(16, 0.0f);
  x[0] = 3.0f;
  x[1] = 2.25f;
  const QuantizeConfig config{ElementFormat::Kind::e2m1, Granularity::tile(16), ScaleRule::nvfp4_4over6};
  const QuantizedTensor q = cpu::quantize(x, 1, 16, config);
  CHECK(q.tensor_scale.encode == 512.0f);
  CHECK(q.scales[0] == 384.0f);
  CHECK(cpu::dequantize(q)[1] == 2.25f);
  CHECK(cpu::quantize(x, 1, 16, {ElementFormat::Kind::e2m1, Granularity::tile(16), ScaleRule::nvfp4}).scales[0] != 384.0f);
  // [6, 4, 3]: tensor amax 6, S_enc = 256, base = s6 = 256, element factor 1: 6, 4, 3 are codes
  // exactly (error 0); map-to-4 (s4 = 384, factor 2/3) puts 4 at 2.67 -> 3, dequantized 4.5: map-to-6 wins.
  std::vector<float> y(16, 0.0f);
  y[0] = 6.0f;
  y[1] = 4.0f;
  y[2] = 3.0f;
  const QuantizedTensor p = cpu::quantize(y, 1, 16, config);
  CHECK(p.scales[0] == 256.0f);
  CHECK(cpu::dequantize(p) == y);
  // An all-zero block: both errors are 0, the tie keeps map-to-6 (s = 0 for both here).
  CHECK(cpu::quantize(std::vector<float>(16, 0.0f), 1, 16, config).scales[0] == 0.0f);
}

TEST_CASE("nvfp4:4over6 refuses tiles other than 1x16 and 16x16, formats other than e2m1, and stochastic rounding") {
  const std::vector<float> x(64, 1.0f);
  CHECK_THROWS_WITH(cpu::quantize(x, 2, 32, {ElementFormat::Kind::e2m1, Granularity::tile(32), ScaleRule::nvfp4_4over6}),
                    Catch::Contains("takes granularity tile:1x16 or block:16x16"));
  CHECK_THROWS_WITH(cpu::quantize(x, 2, 32, {Fp8Format::e4m3, Granularity::tile(16), ScaleRule::nvfp4_4over6}),
                    Catch::Contains("needs format e2m1"));
  CHECK_THROWS_WITH(cpu::quantize(x, 2, 32, {ElementFormat::Kind::e2m1, Granularity::tile(16), ScaleRule::nvfp4_4over6,
                                             {RoundingMode::stochastic, 1}}),
                    Catch::Contains("rounds to nearest only"));
  CHECK_NOTHROW(cpu::quantize(x, 2, 32, {ElementFormat::Kind::e2m1, Granularity::block(16), ScaleRule::nvfp4_4over6}));
}
