// Accumulation models, promotion intervals and the GEMM plan's refusals, each with its reason.
#include <catch2/catch.hpp>

#include "kernels/cpu/quantize.hpp"
#include "kernels/gemm_config.hpp"
#include "harness/metrics/gemm_errors.hpp"

using namespace fp8lab;

TEST_CASE("accumulation model: parse and print") {
  CHECK(AccumulationModel::parse("hopper") == AccumulationModel::hopper());
  CHECK(AccumulationModel::parse("bits:13,depth:32,round:rz").to_string() == "hopper");
  const AccumulationModel b200 = AccumulationModel::parse("bits:25,depth:32,round:rne");
  CHECK(b200.fraction_bits == 25);
  CHECK(b200.rounding == AccumulationModel::Rounding::rne);
  CHECK(b200.to_string() == "bits:25,depth:32,round:rne");
  CHECK(AccumulationModel::parse("bits:13,round:rz,depth:16").depth == 16);
  CHECK(AccumulationModel::parse("fp32").kind == AccumulationModel::Kind::fp32);
  CHECK_THROWS_WITH(AccumulationModel::parse("tf32"), Catch::Contains("not one of hopper, fp32"));
  CHECK_THROWS_WITH(AccumulationModel::parse("bits:13,depth:32"), Catch::Contains("not one of"));
  CHECK_THROWS_WITH(AccumulationModel::parse("bits:x,depth:32,round:rz"), Catch::Contains("fraction bits 'x'"));
  CHECK_THROWS_WITH(AccumulationModel::parse("bits:40,depth:32,round:rz"), Catch::Contains("at most 30"));
  // The zero convention: none by default (MMA-Sim's), min on request, printed only when not default.
  CHECK(AccumulationModel::hopper().zero_exponent == AccumulationModel::ZeroExponent::none);
  CHECK(AccumulationModel::parse("hopper,zero:none") == AccumulationModel::hopper());
  const AccumulationModel zero_min = AccumulationModel::parse("hopper,zero:min");
  CHECK(zero_min.zero_exponent == AccumulationModel::ZeroExponent::min);
  CHECK(zero_min.fraction_bits == 13);
  CHECK(zero_min.to_string() == "hopper,zero:min");
  CHECK(AccumulationModel::parse(zero_min.to_string()) == zero_min);
  CHECK(AccumulationModel::parse("bits:25,depth:32,round:rne,zero:min").to_string() == "bits:25,depth:32,round:rne,zero:min");
  CHECK_THROWS_WITH(AccumulationModel::parse("fp32,zero:min"), Catch::Contains("fused models only"));
  CHECK_THROWS_WITH(AccumulationModel::parse("hopper,zero:max"), Catch::Contains("not one of"));
  CHECK_THROWS_WITH(PromotionInterval::parse("sometimes"), Catch::Contains("not a positive number or never"));
  CHECK_THROWS_WITH(parse_output_type("fp16"), Catch::Contains("not one of fp32, bf16"));
}

TEST_CASE("gemm plan: padding, never, and the refusals that say why") {
  const auto q = [](std::int64_t rows, std::int64_t cols, const char* g, Fp8Format f = Fp8Format::e4m3) {
    return make_quantized_tensor(rows, cols, {f, Granularity::parse(g), ScaleRule::fp32});
  };
  const GemmConfig hopper128{AccumulationModel::hopper(), PromotionInterval::parse("128"), OutputType::fp32};
  const GemmPlan p = plan_gemm(q(4, 300, "tile:1x128"), q(8, 300, "block:128x128"), hopper128);
  CHECK(p.padded_k == 320);
  CHECK(p.interval == 128);
  CHECK(p.intervals == 3);  // 128, 128, 64
  const GemmPlan never = plan_gemm(q(4, 300, "row"), q(8, 300, "tensor"),
                                   {AccumulationModel::hopper(), PromotionInterval::parse("never"), OutputType::fp32});
  CHECK(never.interval == 320);
  CHECK(never.intervals == 1);
  CHECK_THROWS_WITH(plan_gemm(q(4, 300, "tile:1x128"), q(8, 256, "block:128x128"), hopper128),
                    Catch::Contains("same K"));
  // Mixed formats (E4M3 x E5M2, E5M2 x E4M3) plan like a single format: K and the scales decide.
  const GemmPlan mixed = plan_gemm(q(4, 300, "tile:1x128"), q(8, 300, "block:128x128", Fp8Format::e5m2), hopper128);
  CHECK(mixed.padded_k == 320);
  CHECK(mixed.intervals == 3);
  CHECK(plan_gemm(q(4, 256, "row", Fp8Format::e5m2), q(8, 256, "row"), hopper128).interval == 128);
  CHECK_THROWS_WITH(plan_gemm(q(4, 512, "tile:1x128"), q(8, 512, "block:128x128"),
                              {AccumulationModel::hopper(), PromotionInterval::parse("256"), OutputType::fp32}),
                    Catch::Contains("does not divide A's scale extent 128 along K"));
  CHECK_THROWS_WITH(plan_gemm(q(4, 512, "row"), q(8, 512, "block:64x64"),
                              {AccumulationModel::hopper(), PromotionInterval::parse("128"), OutputType::fp32}),
                    Catch::Contains("does not divide B's scale extent 64"));
  CHECK_THROWS_WITH(plan_gemm(q(4, 512, "row"), q(8, 512, "row"),
                              {AccumulationModel::hopper(), PromotionInterval::parse("48"), OutputType::fp32}),
                    Catch::Contains("not a multiple of the instruction depth 32"));
  CHECK_THROWS_WITH(plan_gemm(q(4, 512, "tile:1x128"), q(8, 512, "row"),
                              {AccumulationModel::hopper(), PromotionInterval::parse("never"), OutputType::fp32}),
                    Catch::Contains("promotion interval never does not divide A's scale extent"));
}

TEST_CASE("ratio interval: hand-computed example and finite-population correction") {
  // u = (1, 3), v = (2, 2): R = 4 / 4 = 1; d = (-1, 1), s^2 = 2; mean v = 2.
  // se = sqrt((1 - 2/N) * 2 / 2) / 2; N = 4: sqrt(0.5) / 2 = 0.35355.
  const Interval95 i = ratio_interval({1, 3}, {2, 2}, 4);
  CHECK(i.low == Catch::Detail::Approx(1.0 - 1.96 * 0.3535533906));
  CHECK(i.high == Catch::Detail::Approx(1.0 + 1.96 * 0.3535533906));
  const Interval95 census = ratio_interval({1, 3}, {2, 2}, 2);  // the whole population: no sampling error
  CHECK(census.low == Catch::Detail::Approx(1.0));
  CHECK(census.high == Catch::Detail::Approx(1.0));
}
