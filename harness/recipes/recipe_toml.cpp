#include "harness/recipes/recipe_toml.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <toml++/toml.h>

#include "harness/study/study_spec.hpp"

namespace fp8lab {
namespace {

using train::GemmPrecision;

struct Reader {
  std::filesystem::path file;

  SpecError error(const std::string& field, const std::string& why, const toml::node* where = nullptr) const {
    std::string position = file.string();
    if (where && where->source().begin.line > 0)
      position += ":" + std::to_string(where->source().begin.line) + ":" + std::to_string(where->source().begin.column);
    return SpecError(position + ": field '" + field + "': " + why);
  }

  void only_keys(const toml::table& t, const std::string& prefix, const std::set<std::string>& known) const {
    for (const auto& [key, node] : t)
      if (!known.contains(std::string(key.str()))) {
        std::string list;
        for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
        throw error(prefix + std::string(key.str()), "unknown key (known: " + list + ")", &node);
      }
  }

  std::string string_at(const toml::table& t, const std::string& key, const std::string& field) const {
    const toml::node* n = t.get(key);
    if (!n->is_string()) throw error(field, "expected a string", n);
    return n->value<std::string>().value();
  }

  // Applies the keys of one GEMM table to p.
  void apply_gemm(const toml::table& t, const std::string& field, GemmPrecision& p, bool allow_requantize) const {
    std::set<std::string> known = {"kind",          "format",         "a_format",   "b_format",   "a_granularity",
                                   "b_granularity", "scale",          "accumulation", "promotion",
                                   "amax_history",  "amax_reduction", "margin",     "a_rounding", "b_rounding",
                                   "rht"};
    if (allow_requantize) known.insert("requantize_transposed");
    only_keys(t, field + ".", known);
    const auto parsed = [&](const char* key, auto&& parse) {
      if (!t.contains(key)) return;
      const std::string f = field + "." + key;
      const std::string text = string_at(t, key, f);
      try {
        parse(text);
      } catch (const std::invalid_argument& e) {
        throw error(f, e.what(), t.get(key));
      }
    };
    parsed("kind", [&](const std::string& s) { p.kind = train::parse_gemm_precision_kind(s); });
    // format sets both operands; a_format / b_format one each (a mix such as TE's HYBRID
    // Dgrad, dY E5M2 x W E4M3). Both spellings in one table would leave the order to guess.
    for (const char* one : {"a_format", "b_format"})
      if (t.contains("format") && t.contains(one))
        throw error(field + "." + one, "give either format (both operands) or a_format / b_format, not both",
                    t.get(one));
    parsed("format", [&](const std::string& s) { p.a_format = p.b_format = parse_element_format(s); });
    parsed("a_format", [&](const std::string& s) { p.a_format = parse_element_format(s); });
    parsed("b_format", [&](const std::string& s) { p.b_format = parse_element_format(s); });
    parsed("a_rounding", [&](const std::string& s) { p.a_rounding = parse_rounding_mode(s); });
    parsed("b_rounding", [&](const std::string& s) { p.b_rounding = parse_rounding_mode(s); });
    parsed("a_granularity", [&](const std::string& s) { p.a_granularity = Granularity::parse(s); });
    parsed("b_granularity", [&](const std::string& s) { p.b_granularity = Granularity::parse(s); });
    // "delayed": Transformer Engine's delayed scaling (amax history) instead of a scale rule. The
    // two-level nvfp4 rules are taken here; validate() checks that the format and
    // accumulation can serve them (E2M1 operands on b200's block-scaled MMA).
    parsed("scale", [&](const std::string& s) {
      p.delayed_scaling = s == "delayed";
      if (!p.delayed_scaling) p.scale_rule = parse_scale_rule(s);
    });
    parsed("amax_reduction", [&](const std::string& s) { p.amax_reduction = parse_amax_reduction(s); });
    for (const char* key : {"amax_history", "margin"}) {
      if (!t.contains(key)) continue;
      const toml::node* n = t.get(key);
      if (!n->is_integer()) throw error(field + "." + key, "expected an integer", n);
      const std::int64_t v = n->value<std::int64_t>().value();
      if (std::string(key) == "amax_history") p.amax_history = v;
      else p.margin = static_cast<int>(std::clamp<std::int64_t>(v, -1, 65));  // out of range: validate() says so
    }
    for (const char* key : {"amax_history", "amax_reduction", "margin"})
      if (t.contains(key) && !p.delayed_scaling)
        throw error(field + "." + key, "applies to scale = \"delayed\" only", t.get(key));
    parsed("accumulation", [&](const std::string& s) { p.gemm.accumulation = AccumulationModel::parse(s); });
    parsed("promotion", [&](const std::string& s) { p.gemm.promotion = PromotionInterval::parse(s); });
    for (const auto& [key, flag] : {std::pair<const char*, bool*>{"requantize_transposed", &p.requantize_transposed},
                                    {"rht", &p.rht}}) {
      if (!t.contains(key)) continue;
      const toml::node* n = t.get(key);
      if (!n->is_boolean()) throw error(field + "." + key, "expected true or false", n);
      *flag = n->value<bool>().value();
    }
  }

  const toml::table& table_at(const toml::table& t, const std::string& key, const std::string& field) const {
    const toml::node* n = t.get(key);
    if (!n->is_table()) throw error(field, "expected a table", n);
    return *n->as_table();
  }
};

}  // namespace

train::PrecisionRecipe parse_recipe_toml(const std::string& text, const std::filesystem::path& file,
                                         const train::RecipeLayers& layers, bool allow_training_table) {
  const Reader reader{file};
  toml::table root;
  try {
    root = toml::parse(text, file.string());
  } catch (const toml::parse_error& e) {
    throw SpecError(file.string() + ":" + std::to_string(e.source().begin.line) + ":" +
                    std::to_string(e.source().begin.column) + ": malformed TOML: " + std::string(e.description()));
  }
  reader.only_keys(root, "", {"name", "description", "base", "elementwise", "gemm", "fprop", "dgrad", "wgrad", "override", "training"});
  if (root.contains("training") && !allow_training_table)
    throw reader.error("training", "a recipe's [training] table (the seed techniques) is read by the train study kind only",
                       root.get("training"));
  train::PrecisionRecipe recipe = train::named_recipe("fp32");
  if (root.contains("base")) {
    try {
      recipe = train::named_recipe(reader.string_at(root, "base", "base"));
    } catch (const std::invalid_argument& e) {
      throw reader.error("base", e.what(), root.get("base"));
    }
  }
  if (!root.contains("name")) throw reader.error("name", "missing");
  recipe.name = reader.string_at(root, "name", "name");
  recipe.description = root.contains("description") ? reader.string_at(root, "description", "description") : "";
  if (root.contains("gemm")) {
    const toml::table& all = reader.table_at(root, "gemm", "gemm");
    for (GemmPrecision* p : {&recipe.fprop, &recipe.dgrad, &recipe.wgrad}) reader.apply_gemm(all, "gemm", *p, p == &recipe.wgrad);
  }
  for (train::GemmKind kind : train::kGemmKinds) {
    const std::string key = train::gemm_kind_name(kind);
    if (!root.contains(key)) continue;
    GemmPrecision& p = kind == train::GemmKind::fprop ? recipe.fprop : kind == train::GemmKind::dgrad ? recipe.dgrad : recipe.wgrad;
    reader.apply_gemm(reader.table_at(root, key, key), key, p, kind == train::GemmKind::wgrad);
  }
  if (root.contains("override")) {
    const toml::array* list = root.get("override")->as_array();
    if (!list) throw reader.error("override", "expected [[override]] tables", root.get("override"));
    for (std::size_t i = 0; i < list->size(); ++i) {
      const std::string field = "override[" + std::to_string(i) + "]";
      const toml::table* t = list->get(i)->as_table();
      if (!t) throw reader.error(field, "expected a table", list->get(i));
      reader.only_keys(*t, field + ".", {"layer", "gemm", "fprop", "dgrad", "wgrad"});
      if (!t->contains("layer")) throw reader.error(field + ".layer", "missing", t);
      train::LayerOverride o;
      o.layer = reader.string_at(*t, "layer", field + ".layer");
      for (train::GemmKind kind : train::kGemmKinds) {
        GemmPrecision p = recipe.resolve(o.layer, kind);
        bool set = false;
        if (t->contains("gemm")) {
          reader.apply_gemm(reader.table_at(*t, "gemm", field + ".gemm"), field + ".gemm", p, kind == train::GemmKind::wgrad);
          set = true;
        }
        const std::string key = train::gemm_kind_name(kind);
        if (t->contains(key)) {
          reader.apply_gemm(reader.table_at(*t, key, field + "." + key), field + "." + key, p, kind == train::GemmKind::wgrad);
          set = true;
        }
        if (!set) continue;
        if (kind == train::GemmKind::fprop) o.fprop = p;
        if (kind == train::GemmKind::dgrad) o.dgrad = p;
        if (kind == train::GemmKind::wgrad) o.wgrad = p;
      }
      bool found = false;
      for (const std::string& l : layers.names) found = found || train::override_matches(o.layer, l);
      if (!found && layers.overrides_must_match)
        throw reader.error(field + ".layer", layers.owner + " has no linear layer '" + o.layer + "' (" + layers.naming + ")",
                           t->get("layer"));
      recipe.overrides.push_back(std::move(o));
    }
  }
  if (root.contains("elementwise")) {
    const std::string e = reader.string_at(root, "elementwise", "elementwise");
    if (e != recipe.elementwise())
      throw reader.error("elementwise", "'" + e + "', but this recipe's step runs its non-GEMM ops in " + recipe.elementwise(),
                         root.get("elementwise"));
  }
  try {
    recipe.validate(layers);
  } catch (const std::invalid_argument& e) {
    throw reader.error("gemm", e.what());
  }
  return recipe;
}

train::PrecisionRecipe load_recipe_toml(const std::filesystem::path& file, const train::RecipeLayers& layers,
                                        bool allow_training_table) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw SpecError(file.string() + ": cannot read the recipe file");
  std::ostringstream buffer;
  buffer << in.rdbuf();
  return parse_recipe_toml(buffer.str(), file, layers, allow_training_table);
}

}  // namespace fp8lab
