#include "harness/study/train_technique_fields.hpp"

#include <algorithm>
#include <fstream>
#include <limits>
#include <sstream>

namespace fp8lab {
namespace {

// A spec integer that a field keeps as int: out of int's range it is refused as itself (a clamp
// would report another number than the one written).
int narrow(const std::string& field, std::int64_t value, const std::string& range) {
  if (value < std::numeric_limits<int>::min() || value > std::numeric_limits<int>::max())
    throw std::invalid_argument(field + ": must be in " + range + ", got " + std::to_string(value));
  return static_cast<int>(value);
}

// A field given for an option its table does not select configures nothing: refused, so that a
// typo in the option (or a forgotten one) does not pass unseen.
void refuse_unused(const StudySpec& spec, const std::string& p, const train::SeedTechniques& t) {
  const std::string kind = train::compression_kind_name(t.compression.kind);
  const bool quantize = t.compression.kind == train::CompressionKind::quantize;
  const bool stochastic = quantize && t.compression.rounding == RoundingMode::stochastic;
  const struct {
    const char* key;
    bool applies;
    std::string when;
  } rules[] = {
      {"compression_bits", quantize, "compression = \"quantize\""},
      {"compression_block", quantize, "compression = \"quantize\""},
      {"compression_rounding", quantize, "compression = \"quantize\""},
      {"compression_seed", stochastic, "compression = \"quantize\" with compression_rounding = \"stochastic\""},
      {"topk_ratio", t.compression.kind == train::CompressionKind::topk, "compression = \"topk\""},
      {"error_feedback", t.compressing(), "compression = \"quantize\" or \"topk\""},
      {"sparse_ratio", t.sparse.mode != train::SparseMode::off, "sparse_update = \"gradient\" or \"weight_mask\""},
      {"adaptive_statistic", t.adaptive_on(), "adaptive_every > 0"},
      {"adaptive_low", t.adaptive_on(), "adaptive_every > 0"},
      {"adaptive_high", t.adaptive_on(), "adaptive_every > 0"},
      {"adaptive_patience", t.adaptive_on(), "adaptive_every > 0"},
  };
  for (const auto& rule : rules)
    if (!rule.applies && spec.table.at_path(p + rule.key))
      throw std::invalid_argument(std::string(rule.key) + ": applies with " + rule.when + " only (here compression = \"" +
                                  kind + "\", sparse_update = \"" + train::sparse_mode_name(t.sparse.mode) +
                                  "\", adaptive_every " + (t.adaptive_on() ? "> 0" : "= 0") + ")");
}

}  // namespace

void read_technique_fields(const StudySpec& spec, const std::string& table, train::TrainingRunConfig& run) {
  const std::string p = table + ".";
  train::SeedTechniques& t = run.techniques;
  with_field_errors(spec, table + ".", [&] {
    run.adamw.moments = train::parse_moment_format(spec.get_string(p + "moments", train::moment_format_name(run.adamw.moments)));
    t.workers = spec.get_int(p + "workers", t.workers);
    t.compression.kind = train::parse_compression_kind(
        spec.get_string(p + "compression", train::compression_kind_name(t.compression.kind)));
    t.compression.bits = narrow("compression_bits", spec.get_int(p + "compression_bits", t.compression.bits), "4..16");
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
    a.patience = narrow("adaptive_patience", spec.get_int(p + "adaptive_patience", a.patience), "1..2147483647");
    if (every < 0) throw std::invalid_argument("adaptive_every: must be >= 0 (0: off)");
    a.every = every;
    t.adaptive.reset();
    if (every > 0) t.adaptive = a;
    refuse_unused(spec, p, t);
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
  with_field_errors(recipe, "training.", [&] { run.validate_settings(); });  // with the study's batch (workers must divide it)
}

}  // namespace fp8lab
