// fp8lab recipes: every precision recipe `fp8lab train --recipe`, the studies' recipe axes and
// fp8lab.torch.convert accept, one line each (harness/recipes/recipe_catalog.hpp), and with
// --show NAME what that recipe's three GEMMs are.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>

#include "harness/cli/commands.hpp"
#include "harness/recipes/recipe_catalog.hpp"

namespace fp8lab::cli {

Command add_recipes_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("recipes", "List the precision recipes --recipe accepts (built in and shipped files)");
  auto json = std::make_shared<bool>(false);
  auto show = std::make_shared<std::string>();
  auto markdown = std::make_shared<bool>(false);
  sub->add_flag("--json", *json, "Print the list as JSON");
  sub->add_flag("--markdown", *markdown,
                "Print every recipe's three GEMMs as one Markdown table (the README's; the seed techniques' left out)");
  sub->add_option("--show", *show, "One recipe (a name or a .toml file): its GEMMs and overrides")->check(non_empty());
  return {sub, [json, show, markdown] {
            if (*markdown) {
              std::printf("| recipe | Fprop Y = X W^T | Dgrad dX = dY W | Wgrad dW = dY^T X | overrides |\n|---|---|---|---|---|\n");
              for (const RecipeListing& listing : list_recipes()) {
                if (listing.name.starts_with("seed/")) continue;
                train::RecipeLayers any;
                any.overrides_must_match = false;
                const train::PrecisionRecipe r = resolve_recipe(listing.name, {}, any);
                // Each override as "layers: what", layers with the same override listed together.
                std::vector<std::pair<std::string, std::string>> groups;  // (what, layers)
                for (const train::LayerOverride& o : r.overrides) {
                  std::string what;
                  if (o.fprop && o.dgrad && o.wgrad && o.fprop->describe() == o.dgrad->describe() &&
                      o.fprop->describe() == o.wgrad->describe()) {
                    what = o.fprop->describe();
                  } else {
                    for (train::GemmKind k : train::kGemmKinds) {
                      const auto& p = k == train::GemmKind::fprop ? o.fprop : k == train::GemmKind::dgrad ? o.dgrad : o.wgrad;
                      if (p) what += std::string(what.empty() ? "" : ", ") + train::gemm_kind_name(k) + " " + p->describe();
                    }
                  }
                  auto same = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == what; });
                  if (same == groups.end()) groups.emplace_back(what, o.layer);
                  else same->second += ", " + o.layer;
                }
                std::string overrides;
                for (const auto& [what, layers] : groups) overrides += (overrides.empty() ? "" : "; ") + layers + ": " + what;
                std::printf("| `%s` | %s | %s | %s | %s |\n", r.name.c_str(), r.fprop.describe().c_str(),
                            r.dgrad.describe().c_str(), r.wgrad.describe().c_str(), overrides.c_str());
              }
              return 0;
            }
            if (!show->empty()) {
              train::RecipeLayers any;
              any.overrides_must_match = false;
              const train::PrecisionRecipe r =
                  resolve_recipe(*show, std::filesystem::current_path(), any, /*allow_training_table=*/true);
              std::printf("%s: %s\n", r.name.c_str(), r.description.c_str());
              for (train::GemmKind k : train::kGemmKinds) {
                const train::GemmPrecision& p = k == train::GemmKind::fprop ? r.fprop : k == train::GemmKind::dgrad ? r.dgrad : r.wgrad;
                std::printf("  %-6s %s\n", train::gemm_kind_name(k), p.describe().c_str());
              }
              for (const train::LayerOverride& o : r.overrides)
                for (train::GemmKind k : train::kGemmKinds) {
                  const auto& p = k == train::GemmKind::fprop ? o.fprop : k == train::GemmKind::dgrad ? o.dgrad : o.wgrad;
                  if (p) std::printf("  %-6s of %s: %s\n", train::gemm_kind_name(k), o.layer.c_str(), p->describe().c_str());
                }
              return 0;
            }
            const std::vector<RecipeListing> listing = list_recipes();
            if (*json) {
              nlohmann::json j = {{"recipe_folder", recipe_folder().string()}, {"recipes", nlohmann::json::array()}};
              for (const RecipeListing& r : listing)
                j["recipes"].push_back({{"name", r.name}, {"description", r.description},
                                        {"file", r.file.empty() ? nlohmann::json() : nlohmann::json(r.file.string())}});
              std::printf("%s\n", j.dump(2).c_str());
              return 0;
            }
            std::size_t width = 4;
            for (const RecipeListing& r : listing) width = std::max(width, r.name.size());
            for (const RecipeListing& r : listing)
              std::printf("%-*s  %s%s\n", static_cast<int>(width), r.name.c_str(), r.file.empty() ? "(built in) " : "",
                          r.description.c_str());
            std::printf("\nfiles: %s (FP8LAB_RECIPES sets another folder); --recipe also takes any recipe file, "
                        "path/to/recipe.toml (format: experiments/README.md)\n",
                        recipe_folder().string().c_str());
            return 0;
          }};
}

}  // namespace fp8lab::cli
