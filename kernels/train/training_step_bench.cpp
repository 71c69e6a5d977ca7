// Speed of one training step (forward + backward) of stories260K at 256 positions and of the
// dim256 preset at 1024 positions (1x128 tiles and 128x128 blocks cut real rows there): the FP8
// recipe (deepseek_v3: emulated Hopper GEMMs, bit-exact CPU model) against the fp32 recipe,
// and `full` recompute against `none`, in the same run. Target: the FP8-emulated step
// within 4x of the FP32 step on 2 cores, i.e. tokens/s ratio >= 0.25. The speed targets
// against PyTorch are measured by train_step_vs_torch.py, which runs the *_none cases.
// Counters: tokens_per_second (the ratios' counter) and where the time goes: forward,
// backward and recompute seconds per step, from the engine's own phase timers.
// Token and weight values do not change the work: fixed token ids and a seeded init are used.
#include <string>
#include <vector>

#include "kernels/benchmark_ratios.hpp"
#include "kernels/cpu/cpu_bench_context.hpp"
#include "kernels/train/heap_retention.hpp"
#include "kernels/train/model_weights.hpp"
#include "kernels/train/training_step.hpp"

namespace {

using namespace fp8lab;
using namespace fp8lab::train;

// A preset's shape with seeded weights: the work of a step does not depend on the values, and
// kernels/ reads no data files (the harness fills weights from checkpoints).
const LlamaWeights& weights_of(const std::string& preset) {
  static const LlamaWeights stories = seeded_llama_weights(model_preset("stories260K"), 1);
  static const LlamaWeights dim256 = seeded_llama_weights(model_preset("dim256"), 1);
  return preset == "dim256" ? dim256 : stories;
}

void BM_Step(benchmark::State& state, const std::string& preset, int tokens, const std::string& recipe_name,
             const std::string& policy_spec) {
  const LlamaWeights& weights = weights_of(preset);
  const ModelConfig model = config_of(weights);
  StepInput input{model, &weights, {}};
  input.attention = AttentionKind::flash;  // as training runs compute it
  for (int t = 0; t < tokens; ++t) input.tokens.push_back((t * 37 + 1) % model.vocab);
  const PrecisionRecipe recipe = named_recipe(recipe_name);
  const ActivationPolicy policy = make_policy(policy_spec, model, tokens, 4, AttentionKind::flash);
  double forward = 0, backward = 0, recompute = 0;
  for (auto _ : state) {
    HostAllocator host;
    MemoryLedger ledger(&host);
    const StepResult r = run_training_step(input, recipe, policy, ledger);
    benchmark::DoNotOptimize(r.report.loss);
    forward += r.report.forward_seconds;
    backward += r.report.backward_seconds;
    recompute += r.report.recompute_seconds;
  }
  const auto n = static_cast<double>(state.iterations());
  state.counters["tokens_per_second"] = benchmark::Counter(n * tokens, benchmark::Counter::kIsRate);
  state.counters["forward_s"] = forward / n;
  state.counters["backward_s"] = backward / n;
  state.counters["recompute_s"] = recompute / n;
}

BENCHMARK_CAPTURE(BM_Step, fp32_none, std::string("stories260K"), 256, std::string("fp32"), std::string("none"))->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Step, fp8_none, std::string("stories260K"), 256, std::string("deepseek_v3"), std::string("none"))->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Step, fp32_full, std::string("stories260K"), 256, std::string("fp32"), std::string("full"))->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Step, fp8_full, std::string("stories260K"), 256, std::string("deepseek_v3"), std::string("full"))->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Step, dim256_fp32_none, std::string("dim256"), 1024, std::string("fp32"), std::string("none"))
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_CAPTURE(BM_Step, dim256_fp8_none, std::string("dim256"), 1024, std::string("deepseek_v3"), std::string("none"))
    ->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

int main(int argc, char** argv) {
  fp8lab::train::retain_freed_heap_memory();  // as the CLI does (heap_retention.hpp)
  fp8lab::bench::add_cpu_isa_context();
  return fp8lab::bench::run_with_ratios(argc, argv, "tokens_per_second",
                                        {{"BM_Step/fp8_none", "BM_Step/fp32_none", "fp8 (deepseek_v3) vs fp32 step, none"},
                                         {"BM_Step/fp8_full", "BM_Step/fp32_full", "fp8 (deepseek_v3) vs fp32 step, full"},
                                         {"BM_Step/fp32_full", "BM_Step/fp32_none", "full vs none recompute, fp32"},
                                         {"BM_Step/fp8_full", "BM_Step/fp8_none", "full vs none recompute, fp8"},
                                         {"BM_Step/dim256_fp8_none", "BM_Step/dim256_fp32_none",
                                          "fp8 (deepseek_v3) vs fp32 step, dim256 at 1024 tokens, none"}});
}
