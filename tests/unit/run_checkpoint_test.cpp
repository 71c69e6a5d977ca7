// Training checkpoints (harness/train/run_checkpoint.hpp): a run stopped after k steps and resumed
// from its checkpoint draws the uninterrupted run's curve and ends at its weights, bit for bit
// (fp32 with FP32 moments; fp16 with the loss scaler and BF16 moments); damaged files and another
// run's checkpoint are refused naming the file and the field. The final weights' .safetensors
// file reads back through the project's own reader.
#include <catch2/catch.hpp>
#include <unistd.h>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "data/tensor_io/safetensors.hpp"
#include "harness/train/training_run.hpp"
#include "harness/train/weights_file.hpp"
#include "kernels/train/model_weights.hpp"
#include "kernels/train/sgd.hpp"
#include "tests/support/stories260k_fixture.hpp"

using namespace fp8lab;
using namespace fp8lab::train;

namespace {

std::filesystem::path scratch(const std::string& name) {
  // Per process: two build trees may run this test at once.
  const auto dir = std::filesystem::temp_directory_path() / ("fp8lab_run_checkpoint_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir / name;
}

TrainingRunConfig config(const std::string& recipe, MomentFormat moments) {
  TrainingRunConfig c;
  c.recipe = named_recipe(recipe);
  c.batch = 2;
  c.seq_len = 8;
  c.steps = 5;
  c.schedule.steps = 5;
  c.schedule.lr = 3e-3;
  c.adamw.weight_decay = 0.1;
  c.adamw.moments = moments;
  c.val_every = 2;
  c.val_sequences = 1;
  return c;
}

// Everything but the wall-clock fields.
void require_same_curve(const std::vector<StepRecord>& a, const std::vector<StepRecord>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t s = 0; s < a.size(); ++s) {
    CHECK(a[s].train_loss == b[s].train_loss);
    CHECK((a[s].val_loss == b[s].val_loss || (std::isnan(a[s].val_loss) && std::isnan(b[s].val_loss))));
    CHECK(a[s].grad_norm == b[s].grad_norm);
    CHECK(a[s].lr == b[s].lr);
    CHECK(a[s].loss_scale == b[s].loss_scale);
    CHECK(a[s].skipped == b[s].skipped);
    CHECK(a[s].step_peak_bytes == b[s].step_peak_bytes);
  }
}

void require_same_weights(const LlamaWeights& a, const LlamaWeights& b) {
  CHECK(a.token_embedding == b.token_embedding);
  CHECK(a.wq == b.wq);
  CHECK(a.w2 == b.w2);
  CHECK(a.rms_att == b.rms_att);
  CHECK(a.rms_final == b.rms_final);
}

}  // namespace

TEST_CASE("checkpoint: a run stopped after k steps and resumed draws the uninterrupted curve, bit for bit") {
  const TokenStream stream = test::stories260k_token_stream();
  const LlamaWeights& initial = test::stories260k_weights();
  for (const auto& [recipe, moments] : {std::pair{"fp32", MomentFormat::fp32}, {"fp16", MomentFormat::bf16}}) {
    for (const std::int64_t stop_after : {1, 3}) {
      CAPTURE(recipe, stop_after);
      const TrainingRunConfig c = config(recipe, moments);
      const TrainingRunResult straight = run_training(c, initial, stream, &stream);

      const auto file = scratch(std::string(recipe) + ".ckpt");
      std::filesystem::remove(file);
      Checkpointing first;
      first.file = file;
      first.identity = c.describe();
      std::int64_t steps_seen = 0;
      first.stop_requested = [&] { return ++steps_seen == stop_after; };
      const TrainingRunResult part = run_training(c, initial, stream, &stream, {}, first);
      REQUIRE(part.stopped);
      REQUIRE(part.steps.size() == static_cast<std::size_t>(stop_after));

      const RunCheckpoint saved = read_checkpoint(file);
      CHECK(saved.next_step == stop_after);
      CHECK(saved.identity == c.describe());
      Checkpointing second;
      second.file = file;
      second.resume_from = &saved;
      // The resumed run starts from the checkpoint's weights, not these: pass other ones to show it.
      const TrainingRunResult resumed = run_training(c, seeded_llama_weights(config_of(initial), 9), stream, &stream, {}, second);
      CHECK_FALSE(resumed.stopped);
      CHECK(resumed.resumed_at_step == stop_after);
      require_same_curve(straight.steps, resumed.steps);
      require_same_weights(straight.final_weights, resumed.final_weights);
      CHECK(resumed.optimizer_state_bytes == straight.optimizer_state_bytes);
    }
  }
}

TEST_CASE("checkpoint: periodic checkpoints hold the state of their step") {
  const TokenStream stream = test::stories260k_token_stream();
  TrainingRunConfig c = config("fp32", MomentFormat::fp32);
  const auto file = scratch("periodic.ckpt");
  std::filesystem::remove(file);
  Checkpointing every2;
  every2.file = file;
  every2.every = 2;
  const TrainingRunResult run = run_training(c, test::stories260k_weights(), stream, nullptr, {}, every2);
  const RunCheckpoint last = read_checkpoint(file);  // steps 2 and 4 wrote; the last step (5) does not
  CHECK(last.next_step == 4);
  CHECK(last.records.size() == 4);
  CHECK(last.updates == 4);
  CHECK(last.records[3].train_loss == run.steps[3].train_loss);
  c.steps = c.schedule.steps = 4;  // the same run stopped at 4 steps ends at the checkpoint's weights
  const TrainingRunResult four = run_training(c, test::stories260k_weights(), stream, nullptr);
  REQUIRE(last.tensors.size() == 2 + 9 * static_cast<std::size_t>(four.final_weights.config.n_layers));
  for (const TensorState& t : last.tensors) {
    const std::span<const float> w = named_weight_values(four.final_weights, t.name);
    CHECK(std::equal(w.begin(), w.end(), t.weights.begin(), t.weights.end()));
  }
}

TEST_CASE("checkpoint: a damaged, truncated or foreign file is refused naming the file and the field") {
  const TokenStream stream = test::stories260k_token_stream();
  TrainingRunConfig c = config("fp32", MomentFormat::fp32);
  const auto file = scratch("bad.ckpt");
  Checkpointing one;
  one.file = file;
  one.identity = "spec A\nrecipe = fp32\n";
  one.stop_requested = [] { return true; };
  run_training(c, test::stories260k_weights(), stream, nullptr, {}, one);
  std::ifstream in(file, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto rewrite = [&](const std::string& to) { std::ofstream(file, std::ios::binary | std::ios::trunc) << to; };
  const auto refused = [&](const std::string& fragment) {
    CHECK_THROWS_WITH(read_checkpoint(file), Catch::Contains(file.string()) && Catch::Contains(fragment));
  };

  const RunCheckpoint good = read_checkpoint(file);
  CHECK_THROWS_WITH(require_identity(file, good, "spec A\nrecipe = bf16\n"),
                    Catch::Contains("field 'identity'") && Catch::Contains("recipe = fp32") && Catch::Contains("recipe = bf16"));
  CHECK_NOTHROW(require_identity(file, good, "spec A\nrecipe = fp32\n"));
  // The build that wrote it travels with it; another build is reported, not refused.
  CHECK(good.build == this_build());
  CHECK(build_mismatch(good).empty());
  RunCheckpoint elsewhere = good;
  elsewhere.build = "GCC 99; -O0; -march=x86-64";
  write_checkpoint(file, elsewhere);
  CHECK_THAT(build_mismatch(read_checkpoint(file)), Catch::Contains("another build") && Catch::Contains("GCC 99"));

  rewrite(bytes.substr(0, bytes.size() / 2));
  refused("field 'sha256'");
  std::string flipped = bytes;
  flipped[bytes.size() / 2] ^= 1;
  rewrite(flipped);
  refused("field 'sha256'");
  rewrite("not a checkpoint");
  refused("field 'magic'");
  std::filesystem::remove(file);
  refused("field 'file'");

  // A checkpoint of another model: its tensors do not fit.
  rewrite(bytes);
  RunCheckpoint other = read_checkpoint(file);
  other.tensors[0].weights.pop_back();
  other.tensors[0].m.pop_back();
  other.tensors[0].v.pop_back();
  Checkpointing resume;
  resume.file = file;
  resume.resume_from = &other;
  CHECK_THROWS_WITH(run_training(c, test::stories260k_weights(), stream, nullptr, {}, resume),
                    Catch::Contains("field 'tensors'") && Catch::Contains("embedding"));
  // One that has done more steps than the run has.
  RunCheckpoint done = good;
  c.steps = c.schedule.steps = 1;
  resume.resume_from = &done;
  CHECK_THROWS_WITH(run_training(c, test::stories260k_weights(), stream, nullptr, {}, resume),
                    Catch::Contains("field 'next_step'"));
}

TEST_CASE("final weights: the .safetensors file holds every tensor, shaped, with the config in the metadata") {
  const LlamaWeights& w = test::stories260k_weights();
  const auto file = scratch("final.safetensors");
  write_weights_safetensors(file, w, {{"recipe", "fp32"}});
  const std::vector<std::string> names = safetensors_names(file);
  CHECK(names.size() == 2 + 9 * static_cast<std::size_t>(w.config.n_layers));
  const fp8lab::Tensor wk = read_safetensors(file, "L2.wk");
  CHECK(wk.shape == std::vector<std::int64_t>{w.config.kv_dim(), w.config.dim});
  CHECK(wk.dtype == DType::f32);
  const std::span<const float> expected = named_weight_values(w, "L2.wk");
  const std::vector<float> values = wk.to_float32(file);
  CHECK(std::equal(values.begin(), values.end(), expected.begin(), expected.end()));
  const fp8lab::Tensor w2 = read_safetensors(file, "L0.w2");
  CHECK(w2.shape == std::vector<std::int64_t>{w.config.dim, w.config.hidden_dim});
  CHECK(read_safetensors(file, "rms_final").shape == std::vector<std::int64_t>{w.config.dim});
}

TEST_CASE("checkpoint: a run with every seed technique resumes to the uninterrupted curve, bit for bit") {
  // deepseek_v3 under the adaptive controller (a band the Wgrads' twice-rounded operands fall below,
  // patience 2: a stop after one step leaves streaks half-way), two workers sending their top 10%
  // with error feedback (the residuals carry over), sparse updates with tracked moments, and FP8
  // moments in 1x128 groups (stored decoded, re-encoded on resume).
  const TokenStream stream = test::stories260k_token_stream();
  const LlamaWeights& initial = test::stories260k_weights();
  TrainingRunConfig c = config("deepseek_v3", MomentFormat::e4m3_1x128);
  PrecisionControllerConfig adaptive;
  adaptive.every = 1;
  adaptive.band_low = 30.5;
  adaptive.band_high = 31.5;
  adaptive.patience = 2;
  c.techniques.adaptive = adaptive;
  c.techniques.workers = 2;
  c.techniques.compression.kind = CompressionKind::topk;
  c.techniques.compression.topk_ratio = 0.1;
  c.techniques.compression.error_feedback = true;
  c.techniques.sparse.mode = SparseMode::gradient;
  c.techniques.sparse.ratio = 0.5;
  c.techniques.sparse.frozen_momentum = true;
  const TrainingRunResult straight = run_training(c, initial, stream, &stream);
  REQUIRE_FALSE(straight.switches.empty());  // the controller acted, so its state matters
  for (const std::int64_t stop_after : {1, 3}) {
    CAPTURE(stop_after);
    const auto file = scratch("seed_techniques.ckpt");
    std::filesystem::remove(file);
    Checkpointing first;
    first.file = file;
    std::int64_t steps_seen = 0;
    first.stop_requested = [&] { return ++steps_seen == stop_after; };
    REQUIRE(run_training(c, initial, stream, &stream, {}, first).stopped);
    const RunCheckpoint saved = read_checkpoint(file);
    REQUIRE(saved.controller.has_value());
    REQUIRE(saved.residuals.size() == 2);
    Checkpointing second;
    second.file = file;
    second.resume_from = &saved;
    const TrainingRunResult resumed = run_training(c, initial, stream, &stream, {}, second);
    require_same_curve(straight.steps, resumed.steps);
    require_same_weights(straight.final_weights, resumed.final_weights);
    REQUIRE(resumed.switches.size() == straight.switches.size());
    for (std::size_t i = 0; i < straight.switches.size(); ++i) {
      CHECK(resumed.switches[i].step == straight.switches[i].step);
      CHECK(resumed.switches[i].layer == straight.switches[i].layer);
    }
    // A checkpoint of this run does not fit a run without the techniques' state.
    TrainingRunConfig plain = c;
    plain.techniques = SeedTechniques{};
    CHECK_THROWS_WITH(run_training(plain, initial, stream, &stream, {}, second), Catch::Contains("field 'controller'"));
  }
}
