// Study kind "train": training runs under precision recipes, one run per grid point, with the
// per-step record along a `step` dimension (harness/train/training_run.hpp).
//
// Axes: recipe (a named engine recipe or a TOML recipe file relative to the spec,
// experiments/recipes/), seed (the seeded initialisation's and the shuffled order's;
// a checkpoint start read in sequential order is the same run at every seed, said in the
// operands). Settings:
//   [model]    init = "checkpoint" | "seeded"; checkpoint = "stories260K" | PATH; preset
//   [data]     tokens = "sampled" | PATH (.npy uint16/int32 or raw uint16 .bin); val_tokens = PATH;
//              order = "sequential" | "shuffled"; sampled: sample_tokens, val_sample_tokens,
//              temperature, sample_seed (the corpus from the stories260K checkpoint itself,
//              harness/train/story_sampler.hpp; its validation split is a second sample)
//   [training] batch, seq_len, steps, lr, schedule, warmup, min_lr, weight_decay, beta1, beta2,
//              eps, moments, decay_norm_gains, clip, policy, attention, val_every, val_sequences,
//              checkpoint_every (steps; 0: only when interrupted), save_weights (bool),
//              stats_every (FP8 operand statistics on step 0, every N-th step and the last; 0: never),
//              and the seed techniques' fields (harness/study/train_technique_fields.hpp), which a
//              recipe file on the recipe axis may override in its own [training] table
//              (attention: "flash", the default, or "naive", kernels/train/attention_kind.hpp;
//              it and the policy are also root attributes of the results file)
// Paths are relative to the spec's folder.
//
// Checkpoints (harness/train/run_checkpoint.hpp) of a point go to RESULTS.checkpoints/, one file
// per point, written every checkpoint_every steps and when Ctrl-C / SIGTERM asks the run to stop
// (at the end of the step in progress). `--resume` continues each unfinished point from its
// checkpoint; a finished point's checkpoint is removed. save_weights writes each point's final
// weights to RESULTS.weights/POINT.safetensors (harness/train/weights_file.hpp).
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cmath>
#include <limits>
#include <map>

#include "data/tensor_io/tensor.hpp"
#include "data/sha256.hpp"
#include "harness/runtime/interrupt.hpp"
#include "harness/train/llama2c_weights.hpp"
#include "harness/study/integer_axis_value.hpp"
#include "harness/study/study_kind.hpp"
#include "harness/study/train_technique_fields.hpp"
#include "harness/recipes/recipe_catalog.hpp"
#include "harness/recipes/recipe_toml.hpp"
#include "harness/train/model_init.hpp"
#include "harness/train/step_progress.hpp"
#include "harness/train/story_sampler.hpp"
#include "harness/train/training_run.hpp"
#include "harness/study/train_run_columns.hpp"
#include "harness/train/weights_file.hpp"
#include "kernels/train/activation_policy.hpp"
#include "kernels/train/model_weights.hpp"
#include "kernels/train/precision_recipe.hpp"

namespace fp8lab {
namespace {

using train::TokenStream;

class TrainStudy final : public StudyKind {
 public:
  std::string name() const override { return "train"; }

  std::vector<AxisDef> axes() const override {
    return {{"recipe", {"fp32"}, "precision recipe of every GEMM (kernels/train/precision_recipe.hpp)"},
            {"seed", {"1"}, "seed of the seeded initialisation and of the shuffled order", AxisStorage::integer}};
  }

  void validate_value(const std::string& axis, const std::string& v) const override {
    if (axis == "recipe") recipe_file(v, {});  // an unknown name, refused listing the known ones
    if (axis == "seed") {
      const std::int64_t s = parse_integer_axis_value("seed", v);
      if (s < 0) throw std::invalid_argument("seed " + v + " is negative");
    }
  }

  void configure(const StudySpec& spec) override {
    base_ = spec.file.parent_path();
    const auto path_of = [&](const std::string& text) {
      const std::filesystem::path p(text);
      return p.is_absolute() ? p : base_ / p;
    };
    init_.init = spec.get_string("model.init", "checkpoint");
    init_.checkpoint = spec.get_string("model.checkpoint", "stories260K");
    if (init_.checkpoint != "stories260K") init_.checkpoint = path_of(init_.checkpoint).string();
    init_.preset = spec.get_string("model.preset", "stories260K");
    if (init_.init != "checkpoint" && init_.init != "seeded")
      throw spec.error("model.init", "'" + init_.init + "' is not one of checkpoint, seeded");
    if (init_.init == "seeded") guarded(spec, "model.preset", [&] { train::model_preset(init_.preset); });

    tokens_ = spec.get_string("data.tokens", "sampled");
    if (tokens_ != "sampled") tokens_ = path_of(tokens_).string();
    val_tokens_ = spec.get_string("data.val_tokens", "");
    if (!val_tokens_.empty()) val_tokens_ = path_of(val_tokens_).string();
    sampler_.count = spec.get_int("data.sample_tokens", 32768);
    val_sample_tokens_ = spec.get_int("data.val_sample_tokens", 4096);
    sampler_.temperature = spec.get_double("data.temperature", 1.0);
    sampler_.seed = static_cast<std::uint64_t>(spec.get_int("data.sample_seed", 1234));
    guarded(spec, "data.order", [&] { run_.order = train::parse_batch_order(spec.get_string("data.order", "sequential")); });

    run_.batch = spec.get_int("training.batch", 4);
    run_.seq_len = spec.get_int("training.seq_len", 64);
    run_.steps = spec.get_int("training.steps", 100);
    run_.schedule.steps = run_.steps;
    run_.schedule.lr = spec.get_double("training.lr", 1e-3);
    run_.schedule.min_lr = spec.get_double("training.min_lr", 0.0);
    run_.schedule.warmup = spec.get_int("training.warmup", 0);
    guarded(spec, "training.schedule",
            [&] { run_.schedule.kind = train::parse_lr_schedule(spec.get_string("training.schedule", "constant")); });
    run_.adamw.weight_decay = spec.get_double("training.weight_decay", 0.01);  // torch.optim.AdamW's default
    run_.adamw.beta1 = spec.get_double("training.beta1", 0.9);
    run_.adamw.beta2 = spec.get_double("training.beta2", 0.999);
    run_.adamw.eps = spec.get_double("training.eps", 1e-8);
    run_.decay_norm_gains = spec.get_bool("training.decay_norm_gains", true);
    run_.clip = spec.get_double("training.clip", 0.0);
    run_.policy = spec.get_string("training.policy", "none");
    guarded(spec, "training.attention",
            [&] { run_.attention = train::parse_attention_kind(spec.get_string("training.attention", "flash")); });
    run_.val_every = spec.get_int("training.val_every", 0);
    run_.val_sequences = spec.get_int("training.val_sequences", 8);
    run_.stats_every = spec.get_int("training.stats_every", 10);
    checkpoint_every_ = spec.get_int("training.checkpoint_every", 50);
    if (checkpoint_every_ < 0) throw spec.error("training.checkpoint_every", "must be >= 0 (0: only when interrupted)");
    save_weights_ = spec.get_bool("training.save_weights", false);
    read_technique_fields(spec, "training", run_);
    if (run_.steps < 1 || run_.steps > 1'000'000) throw spec.error("training.steps", "must be in 1..1000000");
    if (run_.seq_len < 1 || run_.seq_len > 4096) throw spec.error("training.seq_len", "must be in 1..4096");
    if (run_.batch < 1 || run_.batch > 4096) throw spec.error("training.batch", "must be in 1..4096");
    with_field_errors(spec, "training.", [&] { run_.validate_settings(); });
    with_field_errors(spec, "data.", [&] {
      if (tokens_ == "sampled") {
        sampler_.validate(512);  // stories260K's seq_len
        if (val_sample_tokens_ < 2) throw std::invalid_argument("val_sample_tokens: must be >= 2");
      }
    });
    if (tokens_ == "sampled" && !val_tokens_.empty())
      throw spec.error("data.val_tokens", "a sampled corpus has its own validation split; give val_tokens with a token file");
    if (tokens_ != "sampled" && !std::filesystem::exists(tokens_)) throw spec.error("data.tokens", tokens_ + ": no such file");
    if (!val_tokens_.empty() && !std::filesystem::exists(val_tokens_))
      throw spec.error("data.val_tokens", val_tokens_ + ": no such file");
  }

  void check_grid(const StudySpec& spec, const std::vector<Point>& points) const override {
    // The model must exist and run every recipe; the token files must fit its vocabulary and
    // hold a batch. All before the results file is created.
    const std::string model_field = init_.init == "seeded" ? "model.preset" : "model.checkpoint";
    for (const Point& p : points) {
      const LlamaWeights* w = nullptr;
      guarded(spec, model_field, [&] { w = &weights(std::stoull(p.at("seed"))); });
      guarded(spec, "axes.recipe", [&] { recipe(p.at("recipe"), *w).validate(train::config_of(*w)); });
      // A recipe file's [training] table must make a valid run too (its own errors name it).
      guarded(spec, "axes.recipe", [&] { run_of(p, *w).validate(); });
      guarded(spec, "training.seq_len", [&] {
        const std::int64_t tokens = run_.seq_len + 1;
        int slices = 1;
        try {
          slices = train::make_policy(run_.policy, train::config_of(*w), tokens, 4, run_.attention).slices;
        } catch (const std::invalid_argument&) {
          // a malformed policy fails its run with the policy's own message (run_training makes it)
        }
        recipe(p.at("recipe"), *w).check_step_tokens(tokens, slices);
      });
    }
    const LlamaWeights& w = weights(std::stoull(points.front().at("seed")));
    model_layers_ = w.config.n_layers;
    if (tokens_ != "sampled") {
      const int vocab = w.config.vocab_size;
      guarded(spec, "data.tokens", [&] { train_stream_ = train::read_token_file(tokens_, vocab); });
      if (!val_tokens_.empty())
        guarded(spec, "data.val_tokens", [&] { val_stream_ = train::read_token_file(val_tokens_, vocab); });
      guarded(spec, "data.tokens", [&] {
        train::BatchSchedule(static_cast<std::int64_t>(train_stream_.tokens.size()), run_.batch, run_.seq_len, run_.order, 0);
      });
      if (val_stream_)
        guarded(spec, "data.val_tokens", [&] {
          train::BatchSchedule(static_cast<std::int64_t>(val_stream_->tokens.size()), 1, run_.seq_len, train::BatchOrder::sequential, 0);
        });
    } else {
      if (sampler_.count < run_.batch * run_.seq_len + 2)
        throw spec.error("data.sample_tokens", std::to_string(sampler_.count) + " tokens are fewer than one batch needs (" +
                                                   std::to_string(run_.batch * run_.seq_len + 2) + ")");
      if (run_.val_every > 0 && val_sample_tokens_ < run_.seq_len + 2)
        throw spec.error("data.val_sample_tokens", std::to_string(val_sample_tokens_) +
                                                       " tokens are fewer than one validation sequence needs (" +
                                                       std::to_string(run_.seq_len + 2) + ")");
      if (w.config.vocab_size < 512)
        throw spec.error("data.tokens", "the sampled corpus has stories260K's 512 ids; the model's vocabulary has " +
                                            std::to_string(w.config.vocab_size));
    }
  }

  std::optional<std::string> skip_reason(const Point&, const Backend&) const override { return std::nullopt; }

  std::vector<ColumnDef> result_columns() const override { return train_run_columns(run_.steps, model_layers_); }

  Row skipped_row(const Point&) const override { return {}; }

  Row evaluate(const Point& p, const RunContext& context) override {
    const std::uint64_t seed = std::stoull(p.at("seed"));
    const LlamaWeights& initial = weights(seed);
    train::TrainingRunConfig c = run_of(p, initial);
    c.data_seed = seed;
    streams(initial);
    const std::string point_name = file_name_of(p);
    train::Checkpointing checkpointing;
    std::optional<train::RunCheckpoint> resume_from;
    if (!context.results_file.empty()) {
      checkpointing.file = checkpoint_file(p, context);
      checkpointing.every = checkpoint_every_;
      checkpointing.identity = "point " + p.key() + "\n" + run_identity(p) + "\n" + c.describe();
      checkpointing.stop_requested = interrupt_requested;
      if (context.resume && std::filesystem::exists(checkpointing.file)) {
        as_bad_input([&] {
          resume_from = train::read_checkpoint(checkpointing.file);
          train::require_identity(checkpointing.file, *resume_from, checkpointing.identity);
        });
        checkpointing.resume_from = &*resume_from;
      }
    }
    const std::int64_t first_step = resume_from ? resume_from->next_step : 0;
    if (resume_from && !context.quiet) {
      std::fprintf(stderr, "fp8lab: %s: resuming at step %lld of %lld from %s\n", p.key().c_str(),
                   static_cast<long long>(first_step), static_cast<long long>(c.steps), checkpointing.file.c_str());
      if (const std::string why = train::build_mismatch(*resume_from); !why.empty())
        std::fprintf(stderr, "fp8lab: warning: checkpoint %s: %s\n", checkpointing.file.c_str(), why.c_str());
    }
    train::StepProgress progress("train " + p.at("recipe") + " seed " + p.at("seed"), c.steps, context.quiet, first_step);
    train::TrainingRunResult r;
    {
      const DeferredInterrupts deferred(!checkpointing.file.empty());
      as_bad_input([&] {
        r = train::run_training(c, initial, train_stream_, val_stream_ ? &*val_stream_ : nullptr,
                                [&](std::int64_t step, const train::StepRecord& s) { progress.record(step, s); },
                                checkpointing);
      });
      if (r.stopped) exit_interrupted();  // the checkpoint is written; the note says how to resume
    }
    if (save_weights_)
      train::write_weights_safetensors(context.results_file.string() + ".weights/" + point_name + ".safetensors",
                                       r.final_weights, {{"point", p.key()}, {"recipe", c.recipe.name}});
    return train_run_row(r, model_layers_, train_stream_.source);
  }

  std::map<std::string, std::string> settings_attributes() const override {
    return {{"attention", train::attention_kind_name(run_.attention)}, {"policy", run_.policy}};
  }

  // The row is in the results file: the point's checkpoint is no longer needed.
  void point_recorded(const Point& p, const RunContext& context) override {
    if (context.results_file.empty()) return;
    const std::filesystem::path file = checkpoint_file(p, context);
    std::error_code ignored;
    std::filesystem::remove(file, ignored);
    std::filesystem::remove(file.string() + ".tmp", ignored);  // one a kill left mid-write
    std::filesystem::remove(file.parent_path(), ignored);      // only when empty
  }

  double point_cost(const Point&) const override { return static_cast<double>(run_.steps * run_.batch * run_.seq_len); }

  std::string operand_description() const override {
    return "training runs from " + (init_.init == "seeded" ? "a seeded " + init_.preset + " init" : init_.checkpoint) +
           " on " + (tokens_ == "sampled" ? std::string("a corpus sampled from the stories260K checkpoint") : tokens_) +
           ", per point in `operands`";
  }

  std::string operand_provenance(const Point& p) const override {
    const std::uint64_t seed = std::stoull(p.at("seed"));
    const LlamaWeights& w = weights(seed);
    streams(w);
    std::string text = init_.describe(w, seed) + "; training tokens: " + train_stream_.source;
    if (val_stream_) text += "; validation tokens: " + val_stream_->source;
    if (init_.init == "checkpoint" && run_.order == train::BatchOrder::sequential)
      text += "; checkpoint start in sequential order: the seed changes nothing";
    return text;
  }

 private:
  // f(), with std::invalid_argument / TensorFileError turned into a SpecError naming `field`.
  template <class F>
  static void guarded(const StudySpec& spec, const std::string& field, F&& f) {
    try {
      f();
    } catch (const std::invalid_argument& e) {
      throw spec.error(field, e.what());
    } catch (const TensorFileError& e) {
      throw spec.error(field, e.what());
    }
  }

  // A checkpoint that cannot be read or is another run's is bad input (exit 2), as a spec is.
  template <class F>
  static void as_bad_input(F&& f) {
    try {
      f();
    } catch (const train::CheckpointError& e) {
      throw std::invalid_argument(e.what());
    }
  }

  // What a checkpoint must match to be resumed: the inputs by content (init, checkpoint and token
  // sha256), not by path, so that moving the data or the results folder keeps a run resumable.
  std::string run_identity(const Point& p) const {
    const std::uint64_t seed = std::stoull(p.at("seed"));
    const LlamaWeights& w = weights(seed);
    streams(w);
    std::string text = init_.init == "seeded" ? init_.describe(w, seed) : "checkpoint sha256 " + w.sha256;
    text += "; training tokens sha256 " + train_stream_.sha256;
    if (val_stream_) text += "; validation tokens sha256 " + val_stream_->sha256;
    return text;
  }

  static std::filesystem::path checkpoint_file(const Point& p, const RunContext& context) {
    return context.results_file.string() + ".checkpoints/" + file_name_of(p) + ".ckpt";
  }

  // The point as a file name: its values with anything but [A-Za-z0-9._-] as '_' (a recipe may
  // be a path), and a hash of its key so that two points never share a name.
  static std::string file_name_of(const Point& p) {
    std::string name;
    for (const auto& [axis, value] : p.values) {
      if (!name.empty()) name += '_';
      for (const char ch : axis + "-" + value) name += std::isalnum(static_cast<unsigned char>(ch)) || ch == '.' || ch == '-' ? ch : '_';
    }
    return name + "_" + sha256_hex(p.key()).substr(0, 8);
  }

  // A recipe name (harness/recipes/recipe_catalog.hpp), or a TOML file relative to the spec; a
  // file's own errors are SpecErrors naming it and its field.
  train::PrecisionRecipe recipe(const std::string& value, const LlamaWeights& model) const {
    return resolve_recipe(value, base_, train::recipe_layers(train::config_of(model)), /*allow_training_table=*/true);
  }

  // The point's run: the study's settings, its recipe, and a recipe file's [training] table.
  train::TrainingRunConfig run_of(const Point& p, const LlamaWeights& model) const {
    train::TrainingRunConfig c = run_;
    c.recipe = recipe(p.at("recipe"), model);
    if (const auto file = recipe_file(p.at("recipe"), base_)) apply_recipe_training_table(*file, c);
    return c;
  }

  const LlamaWeights& weights(std::uint64_t seed) const {
    const std::uint64_t key = init_.init == "seeded" ? seed : 0;
    auto it = weights_.find(key);
    if (it == weights_.end()) it = weights_.emplace(key, init_.load(seed)).first;
    return it->second;
  }

  // The token streams, read or sampled once (the sampled corpus needs the stories260K checkpoint
  // whatever the run starts from: it is the data, not the model).
  void streams(const LlamaWeights& model) const {
    if (!train_stream_.tokens.empty()) return;
    if (tokens_ == "sampled") {  // check_grid made sure the model's vocabulary holds its 512 ids
      const LlamaWeights source = load_llama2c_checkpoint(find_data_file("stories260K/stories260K.bin"), kStories260kSha256);
      const auto sampled = [&](const train::SamplerSettings& s) {
        TokenStream stream;
        stream.tokens = train::sample_corpus(source, s);
        stream.sha256 = train::token_sha256(stream.tokens);
        char temperature[32];
        std::snprintf(temperature, sizeof temperature, "%g", s.temperature);
        stream.source = std::to_string(s.count) + " tokens sampled from stories260K at temperature " + temperature +
                        ", seed " + std::to_string(s.seed) + " (corpus sha256 " + stream.sha256 + ")";
        return stream;
      };
      train_stream_ = sampled(sampler_);
      if (run_.val_every > 0) {  // the validation split is sampled only when something reads it
        train::SamplerSettings val = sampler_;
        val.count = val_sample_tokens_;
        val.seed = sampler_.seed + 1;
        val_stream_ = sampled(val);
        val_stream_->source += " (validation split)";
      }
      return;
    }
    train_stream_ = train::read_token_file(tokens_, model.config.vocab_size);
    if (!val_tokens_.empty()) val_stream_ = train::read_token_file(val_tokens_, model.config.vocab_size);
  }

  std::filesystem::path base_;  // the spec's folder
  train::ModelInit init_;
  train::TrainingRunConfig run_;
  train::SamplerSettings sampler_;
  std::int64_t val_sample_tokens_ = 4096;
  std::int64_t checkpoint_every_ = 50;
  mutable int model_layers_ = 0;  // of the model every point trains (check_grid)
  bool save_weights_ = false;
  std::string tokens_, val_tokens_;
  mutable std::map<std::uint64_t, LlamaWeights> weights_;
  mutable TokenStream train_stream_;
  mutable std::optional<TokenStream> val_stream_;
};

}  // namespace

std::unique_ptr<StudyKind> make_train_study() { return std::make_unique<TrainStudy>(); }

}  // namespace fp8lab
