// Precision recipes as TOML (harness/train_recipe_toml.hpp): the shipped files give the
// engine's named recipes, and every bad input is a SpecError (exit 2 in the CLI) naming the
// file and the field.
#include <catch2/catch.hpp>

#include "harness/study/study_spec.hpp"
#include "harness/train_recipe_toml.hpp"

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
  for (const char* name : {"deepseek_v3", "hybrid"}) {
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

TEST_CASE("recipe TOML: bad input names the file and the field") {
  using Catch::Contains;
  CHECK_THAT(refusal("name = 'x'\ncolour = 'red'\n"), Contains("bad.toml:2:10: field 'colour': unknown key"));
  CHECK_THAT(refusal("name = 'x'\n[gemm]\nkind = 'fp8'\nformat = 'e3m4'\n"), Contains("bad.toml:4:10: field 'gemm.format'"));
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
  try {
    load_recipe_toml("no/such/recipe.toml", stories());
    FAIL("missing file accepted");
  } catch (const SpecError& e) {
    CHECK_THAT(e.what(), Contains("no/such/recipe.toml"));
  }
}
