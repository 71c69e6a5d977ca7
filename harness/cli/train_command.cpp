// fp8lab train: one training run from flags. It is the study kind "train" (harness/study/
// train_study.cpp) on a one-point grid: the flags become a spec, which the results file keeps
// (`spec_toml`), so `fp8lab run` on that text repeats the run; errors name the flag.
#include <cstdio>
#include <map>
#include <memory>
#include <sstream>

#include "harness/cli/commands.hpp"
#include "harness/results/results_report.hpp"
#include "harness/study/study_spec.hpp"

namespace fp8lab::cli {
namespace {

struct TrainFlags {
  std::string recipe = "fp32", init = "stories260K", model = "stories260K", tokens = "sampled", val_tokens, policy = "none",
              moments = "fp32", schedule = "constant", order = "sequential", attention = "flash";
  std::int64_t batch = 4, seq_len = 64, steps = 100, warmup = 0, val_every = 0, val_sequences = 8, sample_tokens = 32768,
               checkpoint_every = 50, stats_every = 10;
  double lr = 1e-3, min_lr = 0, weight_decay = 0.01, clip = 0;
  std::uint64_t seed = 1;
  bool no_decay_norm_gains = false, save_weights = false;
};

// TOML basic string: quotes and backslashes escaped (paths come from the user).
std::string quoted(const std::string& text) {
  std::string q = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') q += '\\';
    q += c;
  }
  return q + "\"";
}

std::string number(double x) {
  std::ostringstream s;
  s.precision(17);
  s << x;
  std::string t = s.str();
  if (t.find_first_of(".eEn") == std::string::npos) t += ".0";  // TOML: a float, not an integer
  return t;
}

std::string spec_text(const TrainFlags& f) {
  std::string model = "[model]\n";
  std::uint64_t seed = f.seed;
  if (f.init.rfind("seed:", 0) == 0) {
    model += "init = \"seeded\"\npreset = " + quoted(f.model) + "\n";
    seed = std::stoull(f.init.substr(5));
  } else {
    model += "init = \"checkpoint\"\ncheckpoint = " + quoted(f.init) + "\n";
  }
  std::string data = "[data]\ntokens = " + quoted(f.tokens) + "\norder = " + quoted(f.order) + "\n";
  if (!f.val_tokens.empty()) data += "val_tokens = " + quoted(f.val_tokens) + "\n";
  if (f.tokens == "sampled") data += "sample_tokens = " + std::to_string(f.sample_tokens) + "\n";
  return "[study]\nname = \"train\"\nkind = \"train\"\ndescription = \"fp8lab train: one training run\"\n"
         "[axes]\nrecipe = [" + quoted(f.recipe) + "]\nseed = [" + std::to_string(seed) + "]\n" + model + data +
         "[training]\nbatch = " + std::to_string(f.batch) + "\nseq_len = " + std::to_string(f.seq_len) +
         "\nsteps = " + std::to_string(f.steps) + "\nlr = " + number(f.lr) + "\nmin_lr = " + number(f.min_lr) +
         "\nschedule = " + quoted(f.schedule) + "\nwarmup = " + std::to_string(f.warmup) +
         "\nweight_decay = " + number(f.weight_decay) + "\nmoments = " + quoted(f.moments) +
         "\ndecay_norm_gains = " + (f.no_decay_norm_gains ? "false" : "true") + "\nclip = " + number(f.clip) +
         "\npolicy = " + quoted(f.policy) + "\nattention = " + quoted(f.attention) +
         "\nval_every = " + std::to_string(f.val_every) +
         "\nval_sequences = " + std::to_string(f.val_sequences) + "\ncheckpoint_every = " +
         std::to_string(f.checkpoint_every) + "\nsave_weights = " + (f.save_weights ? "true" : "false") + "\nstats_every = " +
         std::to_string(f.stats_every) + "\n";
}

// The spec's fields as the flags that set them, for error messages.
const std::map<std::string, std::string> kFlagOf = {
    {"axes.recipe", "--recipe"},         {"axes.seed", "--seed"},           {"model.init", "--init"},
    {"model.checkpoint", "--init"},      {"model.preset", "--model"},       {"data.tokens", "--tokens"},
    {"data.val_tokens", "--val-tokens"}, {"data.order", "--order"},         {"data.sample_tokens", "--sample-tokens"},
    {"training.batch", "--batch"},       {"training.seq_len", "--seq-len"}, {"training.steps", "--steps"},
    {"training.lr", "--lr"},             {"training.min_lr", "--min-lr"},   {"training.schedule", "--schedule"},
    {"training.warmup", "--warmup"},     {"training.weight_decay", "--weight-decay"},
    {"training.moments", "--moments"},   {"training.clip", "--clip"},       {"training.policy", "--policy"},
    {"training.val_every", "--val-every"}, {"training.val_sequences", "--val-sequences"},
    {"training.checkpoint_every", "--checkpoint-every"}, {"training.stats_every", "--stats-every"},
    {"training.attention", "--attention"}};

// "fp8lab train:6:11: field 'axes.recipe': ..." -> "fp8lab train: --recipe: ..." (the line and
// column are of the spec the flags became, which the user never saw).
std::string with_flag_names(std::string message) {
  const std::string name = "fp8lab train:";
  if (message.rfind(name, 0) == 0) {
    const std::size_t field = message.find(" field '");
    if (field != std::string::npos) message = name + message.substr(field);
  }
  const std::size_t at = message.find("field '");
  if (at == std::string::npos) return message;
  const std::size_t end = message.find('\'', at + 7);
  const auto flag = kFlagOf.find(message.substr(at + 7, end - at - 7));
  if (flag == kFlagOf.end()) return message;
  return message.substr(0, at) + flag->second + message.substr(end + 1);
}

}  // namespace

Command add_train_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand("train", "Train a model under a precision recipe; the per-step record to HDF5");
  auto f = std::make_shared<TrainFlags>();
  auto o = std::make_shared<RunOptions>();
  sub->add_option("--recipe", f->recipe, "Precision recipe: a name (fp32, bf16, deepseek_v3, mxfp8, nvfp4, ...: `fp8lab recipes` lists "
                  "them all) or a recipe file, path/to/recipe.toml")->capture_default_str();
  sub->add_option("--init", f->init, "stories260K (the data folder's checkpoint), a llama2.c checkpoint PATH, or seed:N")
      ->capture_default_str();
  sub->add_option("--tokens", f->tokens, "Training tokens: .npy (uint16/int32) or raw uint16 .bin, or 'sampled'")
      ->capture_default_str();
  sub->add_option("--val-tokens", f->val_tokens, "Validation tokens (a sampled corpus has its own split)");
  sub->add_option("--sample-tokens", f->sample_tokens, "Tokens of the sampled corpus")->capture_default_str();
  sub->add_option("--order", f->order, "sequential or shuffled (by --seed)")->capture_default_str();
  sub->add_option("--batch", f->batch, "Sequences per step (gradient accumulation)")->capture_default_str();
  sub->add_option("--seq-len", f->seq_len, "Tokens per sequence (targets per sequence)")->capture_default_str();
  sub->add_option("--steps", f->steps, "Optimizer steps")->capture_default_str();
  sub->add_option("--lr", f->lr, "Peak learning rate")->capture_default_str();
  sub->add_option("--min-lr", f->min_lr, "Cosine schedule: final learning rate")->capture_default_str();
  sub->add_option("--schedule", f->schedule, "constant or cosine (with --warmup)")->capture_default_str();
  sub->add_option("--warmup", f->warmup, "Linear warm-up steps (cosine)")->capture_default_str();
  sub->add_option("--weight-decay", f->weight_decay, "AdamW decoupled weight decay")->capture_default_str();
  sub->add_flag("--no-decay-norm-gains", f->no_decay_norm_gains, "Exclude the RMSNorm gains from weight decay");
  sub->add_option("--moments", f->moments, "AdamW moments: fp32 or bf16")->capture_default_str();
  sub->add_option("--clip", f->clip, "Global gradient-norm clipping (0: off)")->capture_default_str();
  sub->add_option("--policy", f->policy, "Activation policy (none, full, ...)")->capture_default_str();
  sub->add_option("--attention", f->attention, "flash (blockwise: o and the log-sum-exp kept) or naive (probabilities kept)")
      ->capture_default_str();
  sub->add_option("--val-every", f->val_every, "Validation loss every N steps and at the end (0: never)")->capture_default_str();
  sub->add_option("--val-sequences", f->val_sequences, "Validation sequences")->capture_default_str();
  CLI::Option* seed = sub->add_option("--seed", f->seed, "Seed of the shuffled order (with --init seed:N, N seeds both)")
                          ->capture_default_str();
  CLI::Option* model = sub->add_option("--model", f->model, "Model preset for --init seed:N (stories260K, dim256)")
                           ->capture_default_str();
  sub->add_option("--checkpoint-every", f->checkpoint_every,
                  "Checkpoint (OUT.checkpoints/) every N steps; 0: only when interrupted")
      ->capture_default_str();
  sub->add_option("--stats-every", f->stats_every,
                  "FP8 operand SQNR / saturated / flushed on step 0, every N steps and the last (0: never)")
      ->capture_default_str();
  sub->add_flag("--resume", o->resume, "Continue an interrupted run (the same flags) from its last checkpoint");
  sub->add_flag("--save-weights", f->save_weights, "Write the final weights to OUT.weights/*.safetensors");
  sub->add_option("-o,--out", o->out, "Results file (.h5)")->required();
  add_threads_option(sub, o->threads);
  sub->add_flag("--quiet", o->quiet, "No progress on stderr");
  return {sub, [f, o, seed, model] {
            const bool seeded = f->init.rfind("seed:", 0) == 0;
            if (seeded) {
              const std::string digits = f->init.substr(5);
              if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos || digits.size() > 18)
                throw std::invalid_argument("fp8lab train: --init: '" + f->init + "' is not seed:N with N a whole number");
              if (seed->count() > 0)
                throw std::invalid_argument("fp8lab train: --seed: --init " + f->init +
                                            " already seeds the run (the init and the shuffled order); give one of them");
            } else if (model->count() > 0) {
              throw std::invalid_argument("fp8lab train: --model: a preset applies to --init seed:N only; the checkpoint " +
                                          f->init + " has its own shape");
            }
            o->spec = "fp8lab train";
            o->spec_text = spec_text(*f);
            RunSummary r;
            try {
              r = run_study_summary(*o);
            } catch (const SpecError& e) {
              throw std::invalid_argument(with_flag_names(e.what()));
            }
            std::printf("%s", report_table(r.file, {}, 1).c_str());
            std::printf("wrote %s\n", r.file.string().c_str());
            if (f->save_weights) std::printf("final weights in %s.weights/ (.safetensors)\n", r.file.string().c_str());
            return 0;
          }};
}

}  // namespace fp8lab::cli
