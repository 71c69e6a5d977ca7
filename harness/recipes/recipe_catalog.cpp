#include "harness/recipes/recipe_catalog.hpp"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>

#include "harness/recipes/recipe_toml.hpp"
#include "harness/study/study_spec.hpp"

namespace fp8lab {
namespace {

std::filesystem::path& chosen_folder() {
  static std::filesystem::path folder;
  return folder;
}

bool is_builtin(const std::string& name) {
  const std::vector<std::string>& names = train::named_recipe_names();
  return std::find(names.begin(), names.end(), name) != names.end();
}

// The shipped files' names: paths under the folder without ".toml", '/'-separated, sorted.
std::vector<std::string> shipped_names() {
  std::vector<std::string> names;
  std::error_code error;
  const std::filesystem::path folder = recipe_folder();
  for (auto it = std::filesystem::recursive_directory_iterator(folder, error);
       !error && it != std::filesystem::recursive_directory_iterator(); it.increment(error))
    if (it->is_regular_file() && it->path().extension() == ".toml")
      names.push_back(std::filesystem::relative(it->path(), folder).replace_extension().generic_string());
  std::sort(names.begin(), names.end());
  return names;
}


}  // namespace

std::filesystem::path recipe_folder() {
  if (const char* env = std::getenv("FP8LAB_RECIPES"); env && *env) return env;
  if (!chosen_folder().empty()) return chosen_folder();
  return std::filesystem::path(FP8LAB_SOURCE_DIR) / "experiments" / "recipes";
}

void set_recipe_folder(const std::filesystem::path& folder) { chosen_folder() = folder; }

std::vector<RecipeListing> list_recipes() {
  std::vector<RecipeListing> listing;
  for (const std::string& name : train::named_recipe_names()) listing.push_back({name, train::named_recipe(name).description, {}});
  for (const std::string& name : shipped_names()) {
    if (is_builtin(name)) continue;
    const std::filesystem::path file = recipe_folder() / (name + ".toml");
    RecipeListing entry{name, "", file};
    try {
      train::RecipeLayers any;
      any.overrides_must_match = false;
      entry.description = load_recipe_toml(file, any, /*allow_training_table=*/true).description;
    } catch (const std::exception& e) {
      entry.description = std::string("(does not parse: ") + e.what() + ")";
    }
    listing.push_back(std::move(entry));
  }
  return listing;
}

std::optional<std::filesystem::path> recipe_file(const std::string& text, const std::filesystem::path& base) {
  if (text.ends_with(".toml")) {
    const std::filesystem::path p(text);
    return p.is_absolute() ? p : base / p;
  }
  if (is_builtin(text)) return std::nullopt;
  const std::vector<std::string> shipped = shipped_names();
  if (std::find(shipped.begin(), shipped.end(), text) != shipped.end()) return recipe_folder() / (text + ".toml");
  std::string known;
  for (const std::string& name : train::named_recipe_names()) known += (known.empty() ? "" : ", ") + name;
  for (const std::string& name : shipped)
    if (!is_builtin(name)) known += ", " + name;
  throw std::invalid_argument("recipe '" + text + "' is not one of " + known + " (built in, or files in " +
                              recipe_folder().string() + "); or name a recipe file: path/to/recipe.toml (`fp8lab recipes` "
                              "says what each one is)");
}

train::PrecisionRecipe resolve_recipe(const std::string& text, const std::filesystem::path& base,
                                      const train::RecipeLayers& layers, bool allow_training_table) {
  const std::optional<std::filesystem::path> file = recipe_file(text, base);
  if (file) return load_recipe_toml(*file, layers, allow_training_table);
  train::PrecisionRecipe recipe = train::named_recipe(text);
  recipe.validate(layers);
  return recipe;
}

}  // namespace fp8lab
