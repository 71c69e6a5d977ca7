#pragma once
// Precision recipes as TOML files (experiments/recipes/*.toml), read into the engine's
// train::PrecisionRecipe. Errors are SpecError "FILE[:LINE:COL]: field 'X': why" (exit 2):
// malformed TOML, an unknown key or table, a bad value, an override naming a layer the
// model lacks.
//
//   name = "deepseek_v3"
//   description = "..."        # optional: one line, shown by `fp8lab recipes`
//   base = "fp32"              # optional: start from a named recipe (fp64, fp32, bf16, fp16, deepseek_v3, hybrid, fp8_delayed)
//   elementwise = "fp32"       # optional statement; must match what the step runs (fp64 only with fp64 GEMMs)
//   [gemm]                     # keys for all three GEMM kinds ...
//   kind = "fp8"               # fp64 | fp32 | bf16 | fp16 | fp8
//   format = "e4m3"            # fp8: e4m3 | e5m2 (| e2m1 | e3m2 | e2m3 under accumulation "b200"), both operands; or per operand:
//   a_format = "e5m2"          #   A's (dY in Dgrad, dY^T in Wgrad) ...
//   b_format = "e4m3"          #   ... and B's (W in Dgrad, X^T in Wgrad): a mix, TE's HYBRID
//   a_granularity = "tile:1x128"
//   b_granularity = "block:128x128"
//   scale = "fp32"             # a rule of kernels/scale_rules.hpp (fp32, pow2, mx:rceil, nvfp4, ...) | delayed (TE's delayed scaling; per-tensor granularity)
//   a_rounding = "nearest"     # nearest | stochastic (seeded by the operand's bits), A's elements ...
//   b_rounding = "nearest"     #   ... and B's
//   rht = false                # TE's 16x16 Random Hadamard Transform on both operands along K (K % 16 == 0)
//   amax_history = 1024        # delayed only: TE's amax_history_len, amax_compute_algo, margin
//   amax_reduction = "max"     #   max | most_recent
//   margin = 0
//   accumulation = "hopper"    # hopper | fp32 | bits:F,depth:D,round:rz|rne[,zero:none|min]
//   promotion = "128"          # N_C in elements, or "never"
//   [wgrad]                    # ... and per kind ([fprop], [dgrad], [wgrad]) on top
//   requantize_transposed = true
//   [[override]]               # precision decoupling, later entries win
//   layer = "classifier"       # or "L3.wo", or "*.wo" for every block
//   gemm = { kind = "bf16" }   # and/or fprop = {...}, dgrad = {...}, wgrad = {...}
//   [training]                 # the seed techniques for this recipe's runs in the train study kind (fp8lab
//                              # run, fp8lab train; harness/study/train_technique_fields.hpp); refused elsewhere
#include <filesystem>
#include <string>

#include "kernels/train/model_config.hpp"
#include "kernels/train/precision_recipe.hpp"

namespace fp8lab {

// Overrides are checked against `layers` (an engine model's, train::recipe_layers(model), or a
// PyTorch module's): each must name at least one of them.
train::PrecisionRecipe load_recipe_toml(const std::filesystem::path& file, const train::RecipeLayers& layers,
                                        bool allow_training_table = false);
train::PrecisionRecipe parse_recipe_toml(const std::string& text, const std::filesystem::path& file,
                                         const train::RecipeLayers& layers, bool allow_training_table = false);
inline train::PrecisionRecipe load_recipe_toml(const std::filesystem::path& file, const train::ModelConfig& model,
                                               bool allow_training_table = false) {
  return load_recipe_toml(file, train::recipe_layers(model), allow_training_table);
}
inline train::PrecisionRecipe parse_recipe_toml(const std::string& text, const std::filesystem::path& file,
                                                const train::ModelConfig& model, bool allow_training_table = false) {
  return parse_recipe_toml(text, file, train::recipe_layers(model), allow_training_table);
}

}  // namespace fp8lab
