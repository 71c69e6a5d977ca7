// The tiled WGMMA kernel's host plan (kernels/wgmma_tiled_plan.hpp): the widths it picks for the
// DeepSeek-V3 shapes on 132 SMs (the wave arithmetic written out), the instances it may pick
// from, and the scale addressing by shifts for every granularity.
#include <catch2/catch.hpp>

#include "kernels/wgmma_tiled_plan.hpp"

using namespace fp8lab;

namespace {

QuantizedTensor operand(std::int64_t rows, std::int64_t cols, const char* granularity, Fp8Format format = Fp8Format::e4m3) {
  return make_quantized_tensor(rows, cols, {format, Granularity::parse(granularity), ScaleRule::fp32});
}

GemmConfig with_promotion(const char* promotion) {
  GemmConfig c;
  c.promotion = PromotionInterval::parse(promotion);
  return c;
}

}  // namespace

TEST_CASE("wgmma tiled plan: widths for the DeepSeek-V3 shapes on 132 SMs") {
  // M = 4096 (32 row blocks). N = 7168: 128 -> 56 columns, 1792 tiles, 14 waves, cost 14 x 160 =
  // 2240; 160 -> 45 columns, 1440 tiles, 11 waves, 11 x 192 = 2112; 192 -> 38, 1216, 10 waves,
  // 2240: 160. N = 2112: 192 -> 11 columns (exactly), 352 tiles, 3 waves, 672: 192.
  CHECK(choose_tiled_block_n(32, 7168, 132, kTiledWidths) == 160);
  CHECK(choose_tiled_block_n(32, 2112, 132, kTiledWidths) == 192);
  CHECK(choose_tiled_block_n(32, 24576, 132, kTiledWidths) == 192);
  CHECK(choose_tiled_block_n(32, 4096, 132, kTiledWidths) == 128);
  // M = 128 (one row block): enough tiles to fill the SMs. N = 2112: 32 -> 66 tiles, one wave,
  // cost 64 (128 would be 17 tiles on 132 SMs). N = 7168: 64 -> 112 tiles, cost 96.
  // N = 32768: 128 -> 256 tiles, 2 waves, 320; 192 -> 171 tiles, 2 waves, 448.
  CHECK(choose_tiled_block_n(1, 2112, 132, kTiledWidths) == 32);
  CHECK(choose_tiled_block_n(1, 7168, 132, kTiledWidths) == 64);
  CHECK(choose_tiled_block_n(1, 32768, 132, kTiledWidths) == 128);
  CHECK(choose_tiled_block_n(1, 24576, 132, kTiledWidths) == 192);
  CHECK_THROWS(choose_tiled_block_n(1, 0, 132, kTiledWidths));
}

TEST_CASE("wgmma tiled plan: instances by format, B scales and N_C") {
  const QuantizedTensor a = operand(4096, 1024, "tile:1x128"), b = operand(2112, 1024, "block:128x128");
  CHECK(plan_wgmma_tiled_gemm(a, b, with_promotion("128"), 132).block_n == 192);
  // 192 has no N_C = 32 or 64 instance (it spilled): the short intervals choose among the rest.
  const WgmmaTiledPlan short_interval = plan_wgmma_tiled_gemm(a, b, with_promotion("32"), 132);
  CHECK(short_interval.block_n != 192);
  CHECK(short_interval.launch.promotion_template == 32);
  // E5M2 and per-row B run at width 128 only.
  CHECK(plan_wgmma_tiled_gemm(operand(4096, 1024, "tile:1x128", Fp8Format::e5m2),
                              operand(2112, 1024, "block:128x128", Fp8Format::e5m2), GemmConfig{}, 132)
            .block_n == 128);
  const WgmmaTiledPlan per_row = plan_wgmma_tiled_gemm(operand(4096, 1024, "row"), operand(2112, 1024, "row"),
                                                       with_promotion("never"), 132);
  CHECK(per_row.block_n == 128);
  CHECK(per_row.launch.b_scale_per_column);
  CHECK(per_row.launch.stages_per_promotion == 8);
  // What plan_wgmma_gemm refuses, this refuses.
  CHECK_THROWS_WITH(plan_wgmma_tiled_gemm(operand(64, 200, "row"), operand(64, 200, "row"), GemmConfig{}, 132),
                    Catch::Contains("K must be a multiple of 16"));
}

TEST_CASE("wgmma tiled plan: scale addressing by shifts") {
  const WgmmaTiledPlan tiles = plan_wgmma_tiled_gemm(operand(300, 1008, "tile:1x128"), operand(264, 1008, "block:128x128"),
                                                     GemmConfig{}, 132);
  CHECK(tiles.a.row_shift == 0);
  CHECK(tiles.a.k_shift == 0);
  CHECK(tiles.a.scale_cols == 8);  // ceil(1008 / 128)
  CHECK(tiles.b.row_shift == 7);
  CHECK(tiles.b.k_shift == 0);
  CHECK(tiles.b.scale_cols == 8);
  const WgmmaTiledPlan big_blocks = plan_wgmma_tiled_gemm(operand(300, 1024, "tensor"), operand(264, 1024, "block:256x256"),
                                                          GemmConfig{}, 132);
  CHECK(big_blocks.a.row_shift == 30);
  CHECK(big_blocks.a.k_shift == 30);
  CHECK(big_blocks.b.row_shift == 8);  // row >> 8 = row / 256
  CHECK(big_blocks.b.k_shift == 1);    // stage kb covers K from 128 kb: block kb / 2
  CHECK(big_blocks.b.scale_cols == 4);
  const WgmmaTiledPlan rows = plan_wgmma_tiled_gemm(operand(300, 1024, "row"), operand(264, 1024, "tensor"),
                                                    with_promotion("256"), 132);
  CHECK(rows.a.row_shift == 0);
  CHECK(rows.a.k_shift == 30);
  CHECK(rows.b.row_shift == 30);
  CHECK(rows.launch.stages_per_promotion == 2);
  // Wgrad's B = X^T per tile:1x128: the tiled kernel reads it per column and stage (the first
  // kernel refuses it).
  const WgmmaTiledPlan tiled_b = plan_wgmma_tiled_gemm(operand(256, 1024, "tile:1x128"), operand(264, 1024, "tile:1x128"),
                                                       GemmConfig{}, 132);
  CHECK(tiled_b.launch.b_scale_per_column);
  CHECK(tiled_b.block_n == 128);
  CHECK(tiled_b.b.row_shift == 0);
  CHECK(tiled_b.b.k_shift == 0);
  CHECK(tiled_b.b.scale_cols == 8);
  CHECK_THROWS_WITH(plan_wgmma_gemm(operand(256, 1024, "tile:1x128"), operand(264, 1024, "tile:1x128"), GemmConfig{}),
                    Catch::Contains("B must be scaled per block:BxB with B >= 128, row or tensor"));
}
