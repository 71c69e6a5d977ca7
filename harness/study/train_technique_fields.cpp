#include "harness/study/train_technique_fields.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace fp8lab {
namespace {

// f(), an std::invalid_argument "field: why" turned into a SpecError naming table.field.
template <class F>
void guarded(const StudySpec& spec, const std::string& table, F&& f) {
  try {
    f();
  } catch (const std::invalid_argument& e) {
    const std::string what = e.what();
    throw spec.error(table + "." + what.substr(0, what.find(':')), what);
  }
}

}  // namespace

void read_technique_fields(const StudySpec& spec, const std::string& table, train::TrainingRunConfig& run) {
  const std::string p = table + ".";
  train::SeedTechniques& t = run.techniques;
  guarded(spec, table, [&] {
    run.adamw.moments = train::parse_moment_format(spec.get_string(p + "moments", train::moment_format_name(run.adamw.moments)));
    t.workers = spec.get_int(p + "workers", t.workers);
    t.compression.kind = train::parse_compression_kind(
        spec.get_string(p + "compression", train::compression_kind_name(t.compression.kind)));
    t.compression.bits = static_cast<int>(std::clamp<std::int64_t>(spec.get_int(p + "compression_bits", t.compression.bits), -1, 1 << 20));
    t.compression.block = spec.get_int(p + "compression_block", t.compression.block);
    t.compression.rounding = train::parse_compression_rounding(
        spec.get_string(p + "compression_rounding", train::compression_rounding_name(t.compression.rounding)));
    const std::int64_t seed = spec.get_int(p + "compression_seed", static_cast<std::int64_t>(t.compression.seed));
    if (seed < 0) throw std::invalid_argument("compression_seed: must be >= 0");
    t.compression.seed = static_cast<std::uint64_t>(seed);
    t.compression.topk_ratio = spec.get_double(p + "topk_ratio", t.compression.topk_ratio);
    t.compression.error_feedback = spec.get_bool(p + "error_feedback", t.compression.error_feedback);
    t.sparse.mode = train::parse_sparse_mode(spec.get_string(p + "sparse_update", train::sparse_mode_name(t.sparse.mode)));
    t.sparse.ratio = spec.get_double(p + "sparse_ratio", t.sparse.ratio);
    t.sparse.frozen_momentum = spec.get_bool(p + "sparse_frozen_momentum", t.sparse.frozen_momentum);
    train::PrecisionControllerConfig a = t.adaptive.value_or(train::PrecisionControllerConfig{});
    const std::int64_t every = spec.get_int(p + "adaptive_every", t.adaptive ? a.every : 0);
    a.statistic = train::parse_adaptive_statistic(spec.get_string(p + "adaptive_statistic", train::adaptive_statistic_name(a.statistic)));
    a.band_low = spec.get_double(p + "adaptive_low", a.band_low);
    a.band_high = spec.get_double(p + "adaptive_high", a.band_high);
    a.patience = static_cast<int>(std::clamp<std::int64_t>(spec.get_int(p + "adaptive_patience", a.patience), -1, 1 << 20));
    if (every < 0) throw std::invalid_argument("adaptive_every: must be >= 0 (0: off)");
    a.every = every;
    t.adaptive.reset();
    if (every > 0) t.adaptive = a;
    t.validate();
  });
}

void apply_recipe_training_table(const std::filesystem::path& recipe_file, train::TrainingRunConfig& run) {
  StudySpec recipe;
  recipe.file = recipe_file;
  std::ifstream in(recipe_file, std::ios::binary);
  if (!in) throw SpecError(recipe_file.string() + ": cannot read the recipe file");
  std::ostringstream text;
  text << in.rdbuf();
  recipe.text = text.str();
  try {
    recipe.table = toml::parse(recipe.text, recipe_file.string());
  } catch (const toml::parse_error& e) {
    throw SpecError(recipe_file.string() + ": malformed TOML: " + std::string(e.description()));
  }
  const toml::node* training = recipe.table.get("training");
  if (!training) return;
  if (!training->is_table()) throw recipe.error("training", "expected a table");
  for (const auto& [key, value] : *training->as_table()) {
    const auto known = std::ranges::find(train::kSeedTechniqueKeys, key.str()) != std::end(train::kSeedTechniqueKeys);
    if (!known)
      throw recipe.error("training." + std::string(key.str()),
                         "not a technique field (a recipe's [training] sets moments, workers, compression*, topk_ratio, "
                         "error_feedback, sparse_*, adaptive_*; the rest is the study's)");
  }
  read_technique_fields(recipe, "training", run);
}

}  // namespace fp8lab
