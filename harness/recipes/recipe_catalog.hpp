#pragma once
// Every precision recipe a user can name, in one place for `fp8lab train --recipe`, the study
// kinds' `recipe` axes, `fp8lab recipes` and fp8lab.torch.convert: the engine's built-in recipes
// (train::named_recipe), the recipe files shipped in the recipe folder, named by their path
// under it without ".toml" ("mxfp8", "seed/dp4"), and any TOML file named by its path.
//
// The recipe folder: $FP8LAB_RECIPES when set, else the folder set_recipe_folder() was given (the
// installed Python package's own copy), else experiments/recipes/ of the source tree this was
// built from. A built-in name wins over a file of the same stem (the shipped deepseek_v3, hybrid
// and fp8_delayed files are the built-ins written out; a test checks that they agree).
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "kernels/train/precision_recipe.hpp"

namespace fp8lab {

std::filesystem::path recipe_folder();
void set_recipe_folder(const std::filesystem::path& folder);

struct RecipeListing {
  std::string name;         // what --recipe takes
  std::string description;  // one line
  std::filesystem::path file;  // empty for a built-in
};
// The built-in recipes, then the folder's files in name order. A file that does not parse is
// listed with its error as the description (a listing must not fail on one bad file).
std::vector<RecipeListing> list_recipes();

// The file a recipe text names: `text` itself when it ends in ".toml" (relative to `base`), the
// folder's NAME.toml for a shipped name, nothing for a built-in. Throws std::invalid_argument
// for a name that is neither, listing every recipe a user can name and how to name a file.
std::optional<std::filesystem::path> recipe_file(const std::string& text, const std::filesystem::path& base);

// The recipe itself, overrides checked against `layers`; SpecError (file, line, field) for a
// file with an error.
train::PrecisionRecipe resolve_recipe(const std::string& text, const std::filesystem::path& base,
                                      const train::RecipeLayers& layers, bool allow_training_table = false);

}  // namespace fp8lab
