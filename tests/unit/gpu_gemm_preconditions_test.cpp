// The GPU engines' preconditions are host code: every refusal is checked here, on any
// machine, so a GPU run never learns about a bad shape from a failed launch.
#include <catch2/catch.hpp>

#include "kernels/gpu_gemm_preconditions.hpp"

using namespace fp8lab;

namespace {

QuantizedTensor operand(std::int64_t rows, std::int64_t cols, const char* granularity,
                        Fp8Format format = Fp8Format::e4m3) {
  return make_quantized_tensor(rows, cols, {format, Granularity::parse(granularity), ScaleRule::fp32});
}

GemmConfig config_with(const char* promotion, const char* model = "hopper") {
  GemmConfig c;
  c.accumulation = AccumulationModel::parse(model);
  c.promotion = PromotionInterval::parse(promotion);
  return c;
}

bool refuses(const QuantizedTensor& a, const QuantizedTensor& b, const GemmConfig& c, const char* needle) {
  try {
    plan_wgmma_gemm(a, b, c);
  } catch (const std::invalid_argument& e) {
    INFO(e.what());
    return std::string(e.what()).find(needle) != std::string::npos;
  }
  return false;
}

}  // namespace

TEST_CASE("wgmma plan: DeepSeek-V3 scales with N_C 32, 64 and 128") {
  const QuantizedTensor a = operand(100, 4096, "tile:1x128"), b = operand(2112, 4096, "block:128x128");
  for (int nc : {32, 64, 128}) {
    const WgmmaLaunchPlan p = plan_wgmma_gemm(a, b, config_with(std::to_string(nc).c_str()));
    CHECK(p.promotion_template == nc);
    CHECK(p.stages_per_promotion == 1);
    CHECK_FALSE(p.b_scale_per_column);
    CHECK(p.k_blocks == 32);
    CHECK(p.k_instructions == 128);
  }
}

TEST_CASE("wgmma plan: per-row and per-tensor scales take any multiple of 128 and never") {
  const QuantizedTensor a = operand(7, 400, "row"), b = operand(64, 400, "row");
  const WgmmaLaunchPlan p256 = plan_wgmma_gemm(a, b, config_with("256"));
  CHECK(p256.promotion_template == 128);
  CHECK(p256.stages_per_promotion == 2);
  CHECK(p256.b_scale_per_column);
  CHECK(p256.k_blocks == 4);          // ceil(400 / 128)
  CHECK(p256.k_instructions == 13);   // ceil(400 / 32)
  const WgmmaLaunchPlan never = plan_wgmma_gemm(a, operand(64, 400, "tensor"), config_with("never"));
  CHECK(never.stages_per_promotion == 4);  // one partial over all stages
  CHECK_FALSE(never.b_scale_per_column);
}

TEST_CASE("wgmma plan: refusals name the reason") {
  const QuantizedTensor a = operand(64, 256, "tile:1x128"), b = operand(64, 256, "block:128x128");
  CHECK(refuses(a, b, config_with("128", "fp32"), "hopper accumulation model only"));
  CHECK(refuses(a, b, config_with("128", "bits:16,depth:32,round:rz"), "hopper accumulation model only"));
  CHECK(refuses(operand(64, 256, "tile:1x64"), b, config_with("64"), "A must be scaled per tile:1x128"));
  CHECK(refuses(a, operand(64, 256, "block:64x64"), config_with("64"), "B must be scaled per block:BxB with B >= 128"));
  CHECK(refuses(operand(64, 200, "row"), operand(64, 200, "row"), config_with("128"), "K must be a multiple of 16"));
  CHECK(refuses(a, operand(60, 256, "block:128x128"), config_with("128"), "N must be a multiple of 8"));
  CHECK(refuses(operand(8, 512, "row"), operand(8, 512, "row"), config_with("96"), "multiple of the instruction depth") ==
        false);  // 96 is a multiple of 32: plan_gemm accepts it, the kernel must refuse it
  CHECK(refuses(operand(8, 512, "row"), operand(8, 512, "row"), config_with("96"), "32, 64 or a multiple of 128"));
  CHECK(refuses(operand(8, 512, "row"), operand(8, 512, "row"), config_with("160"), "multiple of 128"));
  CHECK(refuses(a, b, config_with("256"), "does not divide"));  // plan_gemm's own refusal passes through
}

TEST_CASE("wgmma plan: K = 0 is refused before any tensor map is encoded") {
  // plan_gemm accepts K = 0 (the emulation gives zeros); the kernel cannot describe it to TMA.
  for (const char* ga : {"tile:1x128", "row", "tensor"}) {
    INFO("A " << ga);
    const QuantizedTensor a = operand(64, 0, ga), b = operand(64, 0, "tensor");
    CHECK_NOTHROW(plan_gemm(a, b, config_with("128")));
    CHECK(refuses(a, b, config_with("128"), "K = 0"));
    CHECK(refuses(a, b, config_with("never"), "K = 0"));
  }
}

TEST_CASE("wgmma plan: both formats, M and N free of the tile size") {
  for (Fp8Format f : {Fp8Format::e4m3, Fp8Format::e5m2}) {
    const WgmmaLaunchPlan p =
        plan_wgmma_gemm(operand(1, 48, "tensor", f), operand(8, 48, "tensor", f), config_with("never"));
    CHECK(p.k_blocks == 1);
    CHECK(p.k_instructions == 2);  // 48 elements: one full and one partial instruction
  }
}

TEST_CASE("cuBLASLt preconditions: shapes, alignment and operands") {
  CHECK(cublaslt_precondition_failure(CublasLtMode::block_scaled, 4096, 2112, 7168, OutputType::bf16).empty());
  CHECK(cublaslt_precondition_failure(CublasLtMode::bf16, 128, 7168, 16384, OutputType::fp32).empty());
  CHECK_THAT(cublaslt_precondition_failure(CublasLtMode::block_scaled, 64, 64, 200, OutputType::fp32),
             Catch::Contains("K must be a multiple of 16"));
  CHECK(cublaslt_precondition_failure(CublasLtMode::bf16, 64, 64, 200, OutputType::fp32).empty());  // 200 % 8 == 0
  CHECK_THAT(cublaslt_precondition_failure(CublasLtMode::per_tensor, 64, 12, 256, OutputType::bf16),
             Catch::Contains("N must be a multiple of 8 for bf16"));
  CHECK_THAT(cublaslt_precondition_failure(CublasLtMode::block_scaled, 66, 64, 256, OutputType::fp32),
             Catch::Contains("M and N multiples of 4"));
  CHECK_THAT(cublaslt_precondition_failure(CublasLtMode::bf16, 0, 64, 256, OutputType::fp32), Catch::Contains("positive"));

  const Granularity t128 = Granularity::tile(128), b128 = Granularity::block(128), tensor = Granularity::tensor();
  CHECK(cublaslt_operand_failure(CublasLtMode::block_scaled, t128, b128).empty());
  CHECK(cublaslt_operand_failure(CublasLtMode::block_scaled, t128, t128).empty());
  CHECK_THAT(cublaslt_operand_failure(CublasLtMode::block_scaled, b128, b128), Catch::Contains("takes A per tile:1x128"));
  CHECK_THAT(cublaslt_operand_failure(CublasLtMode::block_scaled, t128, Granularity::row()),
             Catch::Contains("takes B per block:128x128"));
  CHECK(cublaslt_operand_failure(CublasLtMode::per_tensor, tensor, tensor).empty());
  CHECK_THAT(cublaslt_operand_failure(CublasLtMode::per_tensor, t128, tensor), Catch::Contains("tensor scales"));
}

TEST_CASE("cuBLASLt as a backend GEMM: only the arithmetic it was measured to compute") {
  const QuantizedTensor a = operand(64, 256, "tile:1x128"), b = operand(64, 256, "block:128x128");
  CHECK(cublaslt_config_failure(a, b, config_with("128")).empty());
  CHECK_THAT(cublaslt_config_failure(a, b, config_with("64")), Catch::Contains("one fixed arithmetic"));
  CHECK_THAT(cublaslt_config_failure(a, b, config_with("128", "fp32")), Catch::Contains("one fixed arithmetic"));
  CHECK_THAT(cublaslt_config_failure(operand(64, 256, "row"), b, config_with("128")), Catch::Contains("tile:1x128"));
  // As a backend, B per 1x128 tile is refused: silicon folds those blocks differently.
  CHECK(cublaslt_backend_failure(a, b, config_with("128")).empty());
  const QuantizedTensor b_tiles = operand(64, 256, "tile:1x128");
  CHECK(cublaslt_config_failure(a, b_tiles, config_with("128")).empty());
  CHECK_THAT(cublaslt_backend_failure(a, b_tiles, config_with("128")), Catch::Contains("block:128x128 only"));
  CHECK_THAT(cublaslt_backend_failure(a, b, config_with("64")), Catch::Contains("one fixed arithmetic"));
}

TEST_CASE("cuBLASLt formats: E5M2 x E5M2 is refused up front (it would throw inside the GEMM)") {
  using F = Fp8Format;
  CHECK(cublaslt_format_failure(CublasLtMode::block_scaled, F::e4m3, F::e4m3).empty());
  CHECK(cublaslt_format_failure(CublasLtMode::block_scaled, F::e4m3, F::e5m2).empty());
  CHECK(cublaslt_format_failure(CublasLtMode::per_tensor, F::e5m2, F::e4m3).empty());
  CHECK_THAT(cublaslt_format_failure(CublasLtMode::block_scaled, F::e5m2, F::e5m2), Catch::Contains("no E5M2 x E5M2"));
  CHECK_THAT(cublaslt_format_failure(CublasLtMode::per_tensor, F::e5m2, F::e5m2), Catch::Contains("no E5M2 x E5M2"));
  CHECK(cublaslt_format_failure(CublasLtMode::bf16, F::e5m2, F::e5m2).empty());  // formats unused there
  // As a backend GEMM: the point a study would otherwise lose to an exception is a skip with a reason.
  const QuantizedTensor a = operand(64, 256, "tile:1x128", F::e5m2), b = operand(64, 256, "block:128x128", F::e5m2);
  CHECK_THAT(cublaslt_config_failure(a, b, config_with("128")), Catch::Contains("no E5M2 x E5M2"));
}

TEST_CASE("mixed operand formats: cuBLASLt takes E4M3 x E5M2 and E5M2 x E4M3, the WGMMA kernel refuses them") {
  using F = Fp8Format;
  for (const auto& [fa, fb] : {std::pair{F::e4m3, F::e5m2}, {F::e5m2, F::e4m3}}) {
    const QuantizedTensor a = operand(64, 256, "tile:1x128", fa), b = operand(64, 256, "block:128x128", fb);
    CHECK(cublaslt_config_failure(a, b, config_with("128")).empty());
    CHECK_THROWS_WITH(plan_wgmma_gemm(a, b, config_with("128")),
                      Catch::Contains("built for one FP8 format on both operands"));
  }
}
