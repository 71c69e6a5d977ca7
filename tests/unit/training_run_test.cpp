// The training loop (harness/train/training_run.hpp) on the real stories260K checkpoint: its
// step is recomputed here from engine steps and the optimizer, piece by piece, and its curve
// does not depend on the thread count.
#include <catch2/catch.hpp>
#include <cmath>
#include <omp.h>

#include "harness/train/batch_order.hpp"
#include "harness/train/resident_set.hpp"
#include "harness/train/training_run.hpp"
#include "kernels/memory_ledger.hpp"
#include "kernels/train/model_weights.hpp"
#include "kernels/train/sgd.hpp"
#include "kernels/train/training_step.hpp"
#include "tests/support/stories260k_fixture.hpp"

using namespace fp8lab;
using namespace fp8lab::train;

namespace {

TrainingRunConfig config(std::int64_t batch, std::int64_t seq_len, std::int64_t steps, double lr) {
  TrainingRunConfig c;
  c.batch = batch;
  c.seq_len = seq_len;
  c.steps = steps;
  c.schedule.lr = lr;
  c.schedule.steps = steps;
  c.adamw.weight_decay = 0.1;
  return c;
}

}  // namespace

TEST_CASE("training run: one step of batch 2 is the mean of two engine steps, then AdamW on the mean gradient") {
  const TokenStream stream = test::stories260k_token_stream();
  TrainingRunConfig c = config(2, 16, 1, 1e-3);
  REQUIRE(c.attention == AttentionKind::flash);  // new runs train with flash attention
  c.decay_norm_gains = false;
  const TrainingRunResult run = run_training(c, test::stories260k_weights(), stream, nullptr);

  // By hand: sequences start at 0 and 16 (sequential order, P = 64 - 17 = 47).
  HostAllocator host;
  MemoryLedger ledger(&host);
  const ModelConfig model = config_of(test::stories260k_weights());
  const PrecisionRecipe recipe = named_recipe("fp32");
  const ActivationPolicy policy = make_policy("none", model, 17, 4, c.attention);
  std::vector<StepResult> r;
  for (const int start : {0, 16}) {
    StepInput in{model, &test::stories260k_weights(),
                 std::vector<int>(stream.tokens.begin() + start, stream.tokens.begin() + start + 17)};
    in.attention = c.attention;  // flash: the training runs' default
    r.push_back(run_training_step(in, recipe, policy, ledger));
  }
  CHECK(run.steps[0].train_loss == (r[0].report.loss + r[1].report.loss) / 2);
  LlamaWeights expected = test::stories260k_weights();
  double squares = 0;
  for (std::size_t t = 0; t < r[0].gradients.size(); ++t) {
    const std::vector<double>& a = r[0].gradients[t].values;
    const std::vector<double>& b = r[1].gradients[t].values;
    std::vector<float> mean(a.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      mean[i] = static_cast<float>((a[i] + b[i]) / 2);
      squares += static_cast<double>(mean[i]) * mean[i];
    }
    AdamWMoments moments(mean.size(), MomentFormat::fp32);
    const std::string& name = r[0].gradients[t].name;
    adamw_update(named_weight_values(expected, name), mean, moments, c.adamw, 1, 1e-3,
                 name.find("rms") != std::string::npos ? 0.0 : 0.1);
  }
  CHECK(run.steps[0].grad_norm == std::sqrt(squares));
  CHECK(run.final_weights.wq == expected.wq);
  CHECK(run.final_weights.rms_att == expected.rms_att);
  CHECK(run.final_weights.token_embedding == expected.token_embedding);
  CHECK(run.final_weights.wq != test::stories260k_weights().wq);  // it did move
  // Memory: FP32 master weights, two FP32 moments, the FP32 mean and double sums, beside the step.
  CHECK(run.master_weight_bytes == 4 * run.parameters);
  CHECK(run.optimizer_state_bytes == 8 * run.parameters);
  CHECK(run.peak_bytes == run.steps[0].step_peak_bytes + 24 * run.parameters);
  // The resident set is recorded where the OS reports one; the FP32 master weights alone are resident.
  if (read_resident_set().current_bytes > 0) CHECK(run.steps[0].resident_peak_bytes >= run.master_weight_bytes);
  CHECK(run.parameters == test::stories260k_weights().token_embedding.size() + 5 * (2 * 64 + 64 * 64 * 2 + 2 * 32 * 64 + 3 * 172 * 64) + 64);
}

TEST_CASE("training run: training lowers the loss on a repeated window, under fp32 and the DeepSeek-V3 FP8 recipe") {
  // 18 ids the model does not predict (loss near ln 512 at the start); P = 1: every sequence
  // is the same 17 tokens, which AdamW at lr 1e-2 learns within a few steps.
  TokenStream stream;
  for (int i = 0; i < 18; ++i) stream.tokens.push_back((i * 37 + 11) % 512);
  for (const char* recipe : {"fp32", "deepseek_v3"}) {
    TrainingRunConfig c = config(1, 16, 12, 1e-2);
    c.recipe = named_recipe(recipe);
    const TrainingRunResult run = run_training(c, test::stories260k_weights(), stream, nullptr);
    INFO(recipe << ": loss " << run.steps.front().train_loss << " -> " << run.steps.back().train_loss);
    CHECK(run.steps.front().train_loss > 4.0);
    CHECK(run.steps.back().train_loss < 0.5 * run.steps.front().train_loss);
    for (const StepRecord& s : run.steps) CHECK((!s.skipped && !s.diverged && std::isnan(s.val_loss)));
  }
}

TEST_CASE("training run: a dim256 run whose GEMMs use threads gives the same bits on 1 and 2 threads") {
  // seq_len 256: the MLP's GEMMs (257 x 768 x 256 multiply-adds > 2^24) run on an OpenMP team,
  // so the thread count reaches the arithmetic; stories260K's GEMMs never do.
  TokenStream stream;
  for (int i = 0; i < 600; ++i) stream.tokens.push_back((i * 37 + 11) % 512);
  TrainingRunConfig c = config(1, 256, 2, 1e-3);
  const LlamaWeights initial = seeded_llama_weights(model_preset("dim256"), 5);
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const TrainingRunResult one = run_training(c, initial, stream, nullptr);
  omp_set_num_threads(2);
  const TrainingRunResult two = run_training(c, initial, stream, nullptr);
  omp_set_num_threads(saved);
  for (std::size_t s = 0; s < one.steps.size(); ++s) {
    CHECK(one.steps[s].train_loss == two.steps[s].train_loss);
    CHECK(one.steps[s].grad_norm == two.steps[s].grad_norm);
  }
  CHECK(one.final_weights.w1 == two.final_weights.w1);
}

TEST_CASE("training run: the same run gives the same bits on 1 and 2 threads, and validation is recorded every N steps") {
  const TokenStream stream = test::stories260k_token_stream();
  TrainingRunConfig c = config(2, 8, 4, 1e-3);
  c.recipe = named_recipe("bf16");
  c.val_every = 3;
  c.val_sequences = 2;
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const TrainingRunResult one = run_training(c, test::stories260k_weights(), stream, &stream);
  omp_set_num_threads(2);
  const TrainingRunResult two = run_training(c, test::stories260k_weights(), stream, &stream);
  omp_set_num_threads(saved);
  for (std::size_t s = 0; s < one.steps.size(); ++s) {
    CHECK(one.steps[s].train_loss == two.steps[s].train_loss);
    CHECK(one.steps[s].grad_norm == two.steps[s].grad_norm);
  }
  CHECK(one.final_weights.w1 == two.final_weights.w1);
  CHECK(std::isnan(one.steps[0].val_loss));
  CHECK(std::isfinite(one.steps[2].val_loss));  // step 3 (1-based)
  CHECK(std::isfinite(one.steps[3].val_loss));  // the last step
  CHECK(one.steps[3].val_loss == two.steps[3].val_loss);
}

TEST_CASE("training run: validation runs the forward alone, and its loss is the full step's loss of the same windows") {
  const std::vector<int>& tokens = test::stories260k_tokens();
  const LlamaWeights& w = test::stories260k_weights();
  const ModelConfig m = config_of(w);
  const auto step = [&](bool forward_only) {
    HostAllocator host;
    MemoryLedger ledger(&host);
    StepInput in{m, &w, tokens};
    in.forward_only = forward_only;
    return run_training_step(in, named_recipe("deepseek_v3"), make_policy("none", m, 64, 4), ledger);
  };
  const StepResult full = step(false), forward = step(true);
  CHECK(forward.report.loss == full.report.loss);
  CHECK(forward.gradients.empty());
  CHECK(!full.gradients.empty());

  const TokenStream stream = test::stories260k_token_stream();
  TrainingRunConfig c = config(1, 16, 1, 1e-3);
  c.recipe = named_recipe("bf16");
  c.val_every = 1;
  c.val_sequences = 3;
  const TrainingRunResult run = run_training(c, w, stream, &stream);
  // The windows validation reads (sequential, batch 1), each a full engine step on the weights
  // after the update: the mean of their losses, summed in the same order.
  const BatchSchedule windows(static_cast<std::int64_t>(stream.tokens.size()), 1, c.seq_len, BatchOrder::sequential, 0);
  double sum = 0;
  for (std::int64_t j = 0; j < c.val_sequences; ++j) {
    const auto first = stream.tokens.begin() + static_cast<std::ptrdiff_t>(windows.start(j, 0));
    HostAllocator host;
    MemoryLedger ledger(&host);
    StepInput in{m, &run.final_weights, std::vector<int>(first, first + c.seq_len + 1)};
    in.attention = c.attention;
    sum += run_training_step(in, c.recipe, make_policy(c.policy, m, c.seq_len + 1, 4, c.attention), ledger).report.loss;
  }
  CHECK(run.steps[0].val_loss == sum / static_cast<double>(c.val_sequences));
}

TEST_CASE("training run: bad settings are refused naming the field") {
  const TokenStream stream = test::stories260k_token_stream();
  const auto refusal = [&](TrainingRunConfig c) -> std::string {
    try {
      run_training(c, test::stories260k_weights(), stream, nullptr);
    } catch (const std::invalid_argument& e) {
      return e.what();
    }
    return "accepted";
  };
  TrainingRunConfig c = config(4, 16, 1, 1e-3);  // 4 x 16 + 2 = 66 > 64 tokens
  CHECK_THAT(refusal(c), Catch::Contains("tokens"));
  c = config(1, 16, 1, -1.0);
  CHECK_THAT(refusal(c), Catch::Contains("lr"));
  c = config(1, 16, 1, 1e-3);
  c.recipe.overrides.push_back({"L9.wq", GemmPrecision::plain(GemmPrecision::Kind::bf16), std::nullopt, std::nullopt});
  CHECK_THAT(refusal(c), Catch::Contains("L9.wq"));
  c = config(1, 16, 1, 1e-3);
  c.clip = -1;
  CHECK_THAT(refusal(c), Catch::Contains("clip"));
}
