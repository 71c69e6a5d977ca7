// Precision recipes as TOML (harness/recipes/recipe_toml.hpp): the shipped files give the
// engine's named recipes, and every bad input is a SpecError (exit 2 in the CLI) naming the
// file and the field.
#include <catch2/catch.hpp>

#include "harness/study/study_spec.hpp"
#include "harness/recipes/recipe_toml.hpp"

using namespace fp8lab;
using namespace fp8lab::train;

namespace {

const ModelConfig& stories() {
  static const ModelConfig m = model_preset("stories260K");
  return m;
}

std::string refusal(const std::string& text) {
  try {
    parse_recipe_toml(text, "bad.toml", stories());
  } catch (const SpecError& e) {
    return e.what();
  }
  return "accepted";
}

}  // namespace

TEST_CASE("recipe TOML: the shipped recipes are the engine's named ones") {
  const std::string dir = std::string(FP8LAB_TEST_SOURCE_DIR) + "/experiments/recipes/";
  for (const char* name : {"deepseek_v3", "hybrid", "fp8_delayed"}) {
    INFO(name);
    const PrecisionRecipe file = load_recipe_toml(dir + name + ".toml", stories()), named = named_recipe(name);
    CHECK(file.fprop == named.fprop);
    CHECK(file.dgrad == named.dgrad);
    CHECK(file.wgrad == named.wgrad);
    REQUIRE(file.overrides.size() == named.overrides.size());
    for (const std::string& layer : linear_layer_names(stories()))
      for (GemmKind k : kGemmKinds) CHECK(file.resolve(layer, k) == named.resolve(layer, k));
  }
  const PrecisionRecipe decoupled = load_recipe_toml(dir + "deepseek_v3_bf16_wo_backward.toml", stories());
  CHECK(decoupled.resolve("L3.wo", GemmKind::fprop).kind == GemmPrecision::Kind::fp8);
  CHECK(decoupled.resolve("L3.wo", GemmKind::dgrad).kind == GemmPrecision::Kind::bf16);
  CHECK(decoupled.resolve("L3.wo", GemmKind::wgrad).kind == GemmPrecision::Kind::bf16);
  CHECK(decoupled.resolve("L3.wq", GemmKind::wgrad).kind == GemmPrecision::Kind::fp8);
  CHECK(decoupled.resolve("classifier", GemmKind::fprop).kind == GemmPrecision::Kind::bf16);
}

TEST_CASE("recipe TOML: hybrid is Transformer Engine's HYBRID, E4M3 forward and E5M2 gradients") {
  // Each GEMM's operands as TE's HYBRID quantizes them: the gradient operands (A of Dgrad: dY;
  // A of Wgrad: dY^T) in E5M2, the weights and activations (every B, Fprop's A) in E4M3.
  const std::string file = std::string(FP8LAB_TEST_SOURCE_DIR) + "/experiments/recipes/hybrid.toml";
  for (const PrecisionRecipe& r : {named_recipe("hybrid"), load_recipe_toml(file, stories())}) {
    INFO(r.name);
    for (GemmKind k : kGemmKinds) CHECK(r.resolve("L2.w1", k).kind == GemmPrecision::Kind::fp8);
    CHECK(r.fprop.a_format == Fp8Format::e4m3);  // X
    CHECK(r.fprop.b_format == Fp8Format::e4m3);  // W
    CHECK(r.dgrad.a_format == Fp8Format::e5m2);  // dY
    CHECK(r.dgrad.b_format == Fp8Format::e4m3);  // W
    CHECK(r.wgrad.a_format == Fp8Format::e5m2);  // dY^T
    CHECK(r.wgrad.b_format == Fp8Format::e4m3);  // X^T
    CHECK_THAT(r.dgrad.describe(), Catch::Contains("e5m2 x e4m3"));
  }
}

TEST_CASE("recipe TOML: per-operand formats, and requantize_transposed keeps each source's format") {
  const auto parse = [](const std::string& text) { return parse_recipe_toml(text, "mixed.toml", stories()); };
  const PrecisionRecipe r = parse("name = 'x'\n[gemm]\nkind = 'fp8'\nformat = 'e5m2'\n[fprop]\nb_format = 'e4m3'\n");
  CHECK(r.fprop.a_format == Fp8Format::e5m2);
  CHECK(r.fprop.b_format == Fp8Format::e4m3);
  CHECK(r.dgrad.b_format == Fp8Format::e5m2);  // [gemm]'s format: both operands
  // DeepSeek-V3's re-quantized Wgrad with E5M2 gradients: dY^T comes from Dgrad's A (dY, E5M2)
  // and X^T from Fprop's A (X, E4M3), so Wgrad must be E5M2 x E4M3 ...
  const std::string requantized = "name = 'x'\nbase = 'deepseek_v3'\n[dgrad]\na_format = 'e5m2'\n[wgrad]\n";
  CHECK(parse(requantized + "a_format = 'e5m2'\n").wgrad.a_format == Fp8Format::e5m2);
  // ... and refuses a Wgrad A format its source does not give it.
  CHECK_THAT(refusal(requantized + "a_format = 'e4m3'\n"),
             Catch::Contains("needs dgrad in fp8 with A granularity tile:1x128, A format e4m3 (wgrad's A format)"));
  CHECK_THAT(refusal(requantized + "a_format = 'e5m2'\nb_format = 'e5m2'\n"),
             Catch::Contains("needs fprop in fp8 with A granularity tile:1x128, A format e5m2 (wgrad's B format)"));
}

TEST_CASE("recipe TOML: bad input names the file and the field") {
  using Catch::Contains;
  CHECK_THAT(refusal("name = 'x'\ncolour = 'red'\n"), Contains("bad.toml:2:10: field 'colour': unknown key"));
  CHECK_THAT(refusal("name = 'x'\n[gemm]\nkind = 'fp8'\nformat = 'e3m4'\n"), Contains("bad.toml:4:10: field 'gemm.format'"));
  CHECK_THAT(refusal("name = 'x'\n[dgrad]\nkind = 'fp8'\nb_format = 'e6m1'\n"),
             Contains("bad.toml:4:12: field 'dgrad.b_format': format 'e6m1' is not one of e4m3, e5m2"));
  CHECK_THAT(refusal("name = 'x'\n[wgrad]\nformat = 'e4m3'\na_format = 'e5m2'\n"),
             Contains("bad.toml:4:12: field 'wgrad.a_format': give either format (both operands) or a_format / b_format"));
  CHECK_THAT(refusal("name = 'x'\n[fprop]\na_format = 5\n"), Contains("field 'fprop.a_format': expected a string"));
  CHECK_THAT(refusal("name = 'x'\n[fprop]\ngranularity = 'row'\n"), Contains("field 'fprop.granularity': unknown key"));
  CHECK_THAT(refusal("name = 'x'\n[[override]]\nlayer = 'L7.wo'\ngemm = { kind = 'bf16' }\n"),
             Contains("field 'override[0].layer': model stories260K has no linear layer 'L7.wo'"));
  CHECK_THAT(refusal("name = 'x'\n[[override]]\nlayer = '*.wz'\ngemm = { kind = 'bf16' }\n"),
             Contains("field 'override[0].layer'"));
  CHECK_THAT(refusal("name = 'x'\n[[override]]\nlayer = 'L1.wo'\ngemm = { kind = 'bf16', depth = 3 }\n"),
             Contains("field 'override[0].gemm.depth': unknown key"));
  CHECK_THAT(refusal("name = 'x'\nbase = 'fp7'\n"), Contains("field 'base': recipe 'fp7' is not one of"));
  CHECK_THAT(refusal("name = 'x'\nelementwise = 'bf16'\n"), Contains("field 'elementwise'"));
  CHECK_THAT(refusal("name = 'x'\n[gemm]\nkind = 'fp8'\n[wgrad]\nrequantize_transposed = true\n[dgrad]\na_granularity = 'row'\n"),
             Contains("requantize_transposed"));
  CHECK_THAT(refusal("name = 'x'\n[gemm]\nkind = 'fp64'\n[fprop]\nkind = 'fp32'\n"), Contains("cannot be mixed"));
  CHECK_THAT(refusal("name = 'x'\n[gemm\n"), Contains("bad.toml:2"));
  CHECK_THAT(refusal("[gemm]\nkind = 'fp32'\n"), Contains("field 'name': missing"));
  CHECK_THAT(refusal("name = 'x'\n[gemm]\nkind = 'fp8'\npromotion = 'sometimes'\n"), Contains("field 'gemm.promotion'"));
  CHECK_THAT(refusal("name = 'x'\n[wgrad]\nrequantize_transposed = 'yes'\n"), Contains("field 'wgrad.requantize_transposed'"));
  CHECK_THAT(refusal("name = 'x'\n[gemm]\nkind = 'fp8'\namax_history = 16\n"),
             Contains("field 'gemm.amax_history': applies to scale = \"delayed\" only"));
  CHECK_THAT(refusal("name = 'x'\n[gemm]\nkind = 'fp8'\nscale = 'delayed'\n"), Contains("delayed scaling keeps one scale per tensor"));
  CHECK_THAT(refusal("name = 'x'\n[gemm]\nkind = 'fp8'\na_granularity = 'tensor'\nb_granularity = 'tensor'\n"
                     "scale = 'delayed'\namax_history = 0\n"),
             Contains("field 'history_length'"));
  CHECK_THAT(refusal("name = 'x'\n[gemm]\nkind = 'fp8'\nscale = 'delayed'\namax_reduction = 'mean'\n"),
             Contains("field 'gemm.amax_reduction'"));
  CHECK_THAT(refusal("name = 'x'\n[gemm]\nkind = 'fp8'\nscale = 'delayed'\nmargin = 'big'\n"),
             Contains("field 'gemm.margin': expected an integer"));
  // NVFP4's fields: roundings, the RHT flag, E2M1 and the two-level rule where they cannot run.
  CHECK_THAT(refusal("name = 'x'\n[gemm]\nkind = 'fp8'\na_rounding = 'up'\n"),
             Contains("bad.toml:4:14: field 'gemm.a_rounding': rounding 'up' is not one of nearest, stochastic"));
  CHECK_THAT(refusal("name = 'x'\n[wgrad]\nrht = 'yes'\n"), Contains("bad.toml:3:7: field 'wgrad.rht': expected true or false"));
  CHECK_THAT(refusal("name = 'x'\n[gemm]\nkind = 'fp8'\nformat = 'e2m1'\na_granularity = 'tile:1x16'\n"
                     "b_granularity = 'tile:1x16'\nscale = 'nvfp4'\n"),
             Contains("field 'gemm': fprop of L0.wq, operand A: format e2m1 runs on Blackwell's block-scaled MMA only"));
  CHECK_THAT(refusal("name = 'x'\n[gemm]\nkind = 'fp8'\nscale = 'nvfp4'\naccumulation = 'b200'\npromotion = 'never'\n"),
             Contains("operand A: scale rule nvfp4 needs format e2m1, not e4m3"));
  CHECK_THAT(refusal("name = 'x'\n[gemm]\nkind = 'fp8'\nformat = 'e2m1'\na_granularity = 'tile:1x16'\n"
                     "b_granularity = 'block:16x16'\nscale = 'nvfp4:4over6'\naccumulation = 'b200'\npromotion = 'never'\n"
                     "a_rounding = 'stochastic'\n"),
             Contains("fprop of L0.wq, operand A: scale rule nvfp4:4over6 rounds to nearest only"));
  CHECK_THAT(refusal("name = 'x'\n[gemm]\nkind = 'fp8'\nformat = 'e2m1'\na_granularity = 'tile:1x16'\n"
                     "b_granularity = 'tile:1x32'\nscale = 'nvfp4:4over6'\naccumulation = 'b200'\npromotion = 'never'\n"),
             Contains("operand B: scale rule nvfp4:4over6 takes granularity tile:1x16 or block:16x16"));
  CHECK_THAT(refusal("name = 'x'\n[gemm]\nkind = 'fp8'\n[wgrad]\nrequantize_transposed = true\nrht = true\n"),
             Contains("wgrad of L0.wq: rht transforms the high-precision operands"));
  CHECK_THAT(refusal("name = 'x'\n[gemm]\nkind = 'fp8'\nformat = 'e2m1'\na_granularity = 'tensor'\n"
                     "b_granularity = 'tensor'\nscale = 'delayed'\naccumulation = 'b200'\npromotion = 'never'\n"),
             Contains("delayed scaling takes e4m3 or e5m2, not e2m1"));
  // What would otherwise be ignored or fail mid-run: rht outside Wgrad, stochastic rounding
  // under delayed scaling or beside a re-quantizing Wgrad.
  CHECK_THAT(refusal("name = 'x'\n[gemm]\nkind = 'fp8'\n[fprop]\nrht = true\n"),
             Contains("fprop of L0.wq: rht applies to Wgrad's operands only"));
  CHECK_THAT(refusal("name = 'x'\n[gemm]\nkind = 'fp8'\na_granularity = 'tensor'\nb_granularity = 'tensor'\n"
                     "scale = 'delayed'\nb_rounding = 'stochastic'\n"),
             Contains("delayed scaling rounds to nearest"));
  CHECK_THAT(refusal("name = 'x'\n[gemm]\nkind = 'fp8'\n[wgrad]\nrequantize_transposed = true\n[dgrad]\n"
                     "a_rounding = 'stochastic'\n"),
             Contains("wgrad.requantize_transposed of L0.wq: re-quantizes with nearest rounding"));
  try {
    load_recipe_toml("no/such/recipe.toml", stories());
    FAIL("missing file accepted");
  } catch (const SpecError& e) {
    CHECK_THAT(e.what(), Contains("no/such/recipe.toml"));
  }
}

TEST_CASE("recipe TOML: experiments/recipes/mxfp8.toml runs every GEMM on Blackwell's block-scaled MMA") {
  const std::string file = std::string(FP8LAB_TEST_SOURCE_DIR) + "/experiments/recipes/mxfp8.toml";
  const PrecisionRecipe r = load_recipe_toml(file, stories());
  for (const GemmKind k : kGemmKinds) {
    const GemmPrecision& p = r.resolve("L0.wq", k);
    INFO(static_cast<int>(k));
    CHECK(p.kind == GemmPrecision::Kind::fp8);
    CHECK(p.scale_rule == ScaleRule::mx_rceil);
    CHECK(p.a_granularity == Granularity::tile(32));
    CHECK(p.b_granularity == Granularity::tile(32));
    CHECK(p.gemm.accumulation == AccumulationModel::b200());
    CHECK(p.gemm.promotion.never);
    CHECK_FALSE(p.requantize_transposed);
  }
  CHECK(r.resolve("classifier", GemmKind::fprop).kind == GemmPrecision::Kind::bf16);
}

TEST_CASE("recipe TOML: experiments/recipes/nvfp4.toml is Transformer Engine's NVFP4 recipe") {
  const std::string file = std::string(FP8LAB_TEST_SOURCE_DIR) + "/experiments/recipes/nvfp4.toml";
  const PrecisionRecipe r = load_recipe_toml(file, stories());
  for (const GemmKind k : kGemmKinds) {
    const GemmPrecision& p = r.resolve("L0.w2", k);
    INFO(gemm_kind_name(k));
    CHECK(p.kind == GemmPrecision::Kind::fp8);
    CHECK(p.a_format == ElementFormat::Kind::e2m1);
    CHECK(p.b_format == ElementFormat::Kind::e2m1);
    CHECK(p.scale_rule == ScaleRule::nvfp4);
    CHECK(p.gemm.accumulation == AccumulationModel::b200());
    CHECK(p.gemm.promotion.never);
    CHECK_FALSE(p.requantize_transposed);
    // 1x16 tiles for activations and gradients; 2-D 16x16 blocks for W (Fprop's B) and W^T (Dgrad's B).
    CHECK(p.a_granularity == Granularity::tile(16));
    CHECK(p.b_granularity == (k == GemmKind::wgrad ? Granularity::tile(16) : Granularity::block(16)));
    // Stochastic rounding on the gradient operands only (A of Dgrad and Wgrad: dY, dY^T).
    CHECK(p.a_rounding == (k == GemmKind::fprop ? RoundingMode::nearest : RoundingMode::stochastic));
    CHECK(p.b_rounding == RoundingMode::nearest);
    // The Random Hadamard Transform on the Wgrad operands only.
    CHECK(p.rht == (k == GemmKind::wgrad));
  }
  for (const char* layer : {"classifier", "L4.wq", "L4.wk", "L4.wv", "L4.wo", "L4.w1", "L4.w2", "L4.w3"})
    for (const GemmKind k : kGemmKinds) {
      INFO(layer << " " << gemm_kind_name(k));
      CHECK(r.resolve(layer, k).kind == GemmPrecision::Kind::bf16);
    }
  CHECK(r.resolve("L3.wo", GemmKind::wgrad).kind == GemmPrecision::Kind::fp8);
  CHECK_THAT(r.wgrad.describe(), Catch::Contains("A stochastic rht"));
}
