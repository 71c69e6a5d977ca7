// The training step's memory ledger: shapes-only mode runs the same schedule and gives
// byte-identical figures to the allocating run (naive and flash attention); per-block saved activation bytes reproduce
// Megatron's formula with the terms the Llama block changes derived below, and `full`'s
// 2 s b h; the public models' peaks come out of shapes alone.
#include <catch2/catch.hpp>
#include <chrono>

#include "harness/metrics/train_step_errors.hpp"
#include "harness/train/llama2c_weights.hpp"
#include "kernels/train/model_weights.hpp"
#include "kernels/train/training_step.hpp"

using namespace fp8lab;
using namespace fp8lab::train;

namespace {

StepReport run(const ModelConfig& m, const LlamaWeights* w, std::int64_t T, const std::string& recipe, const std::string& policy,
               bool shapes_only, int element_bytes = 4, AttentionKind attention = AttentionKind::naive) {
  HostAllocator host;
  MemoryLedger ledger(shapes_only ? nullptr : &host);
  StepInput in{m, w, {}, T, element_bytes};
  in.attention = attention;
  if (!shapes_only)
    for (std::int64_t t = 0; t < T; ++t) in.tokens.push_back(static_cast<int>((t * 7 + 1) % m.vocab));
  return run_training_step(in, named_recipe(recipe), make_policy(policy, m, T, element_bytes, attention), ledger).report;
}

void check_identical(const StepReport& a, const StepReport& b) {
  CHECK(a.peak_bytes == b.peak_bytes);
  CHECK(a.peak_bytes_total == b.peak_bytes_total);
  CHECK(a.saved_activation_bytes == b.saved_activation_bytes);
  CHECK(a.saved_bytes_per_block == b.saved_bytes_per_block);
  REQUIRE(a.phases.size() == b.phases.size());
  for (std::size_t i = 0; i < a.phases.size(); ++i) {
    INFO(a.phases[i].name);
    CHECK(a.phases[i].name == b.phases[i].name);
    CHECK(a.phases[i].peak == b.phases[i].peak);
    CHECK(a.phases[i].peak_total == b.phases[i].peak_total);
  }
}

}  // namespace

TEST_CASE("train ledger: shapes-only figures are byte-identical to the allocating run") {
  const LlamaWeights stories = load_llama2c_checkpoint(find_data_file("stories260K/stories260K.bin"), kStories260kSha256);
  const ModelConfig mid{"mid", 256, 688, 3, 8, 2, 1000};
  const LlamaWeights mid_weights = seeded_llama_weights(mid, 1);
  struct Case {
    ModelConfig model;
    const LlamaWeights* weights;
    std::int64_t tokens;
  };
  for (const AttentionKind attention : {AttentionKind::naive, AttentionKind::flash})
    for (const Case& c : {Case{config_of(stories), &stories, 64}, Case{mid, &mid_weights, 128}})
      for (const char* recipe : {"fp32", "deepseek_v3", "fp64"})
        for (const char* policy : {"none", "full", "selective", "deepseek", "slices:4", "budget:0.4", "tensors:p=recompute"}) {
          INFO(attention_kind_name(attention) << " " << c.model.name << " " << recipe << " " << policy);
          // The mid-size model (seconds per allocating step) takes one of each kind of schedule.
          if (c.model.name == "mid" && (std::string(recipe) == "fp64" || std::string(policy) == "full" ||
                                        std::string(policy) == "selective" || std::string(policy).starts_with("tensors")))
            continue;
          const int eb = std::string(recipe) == "fp64" ? 8 : 4;
          const StepReport real = run(c.model, c.weights, c.tokens, recipe, policy, false, eb, attention);
          const StepReport shapes = run(c.model, nullptr, c.tokens, recipe, policy, true, eb, attention);
          check_identical(real, shapes);
          CHECK(real.peak_bytes[static_cast<std::size_t>(MemoryCategory::weights)] > 0);
        }
}

// Megatron-LM (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
// Transformer Models", sec. 4.1), per transformer layer, 16-bit activations, 1-byte dropout
// masks, sequence s, micro-batch b, hidden h, heads a:
//   attention 11 s b h + 5 a s^2 b = QKV input 2sbh + Q, K 4sbh + V 2sbh + softmax output
//             2as^2b + its dropout mask as^2b + dropout output 2as^2b + projection input 2sbh
//             + dropout mask sbh;
//   MLP       19 s b h = fc1 input 2sbh + GeLU input (4h wide) 8sbh + GeLU output 8sbh +
//             dropout mask sbh;
//   norms      4 s b h = two LayerNorm inputs;  total s b h (34 + 5 a s / h).
// The Llama block run here (layer_graph.hpp) differs in exactly these terms:
//   no dropout:  - sbh (attention mask) - sbh (MLP mask) - as^2b (probs mask) - 2as^2b (probs dropout output)
//   SwiGLU with hidden F (both h1 and h3 kept, g kept): MLP = 2sbh + 3 * 2sbF instead of 2sbh + 16sbh
//   GQA: K and V are kv_dim = kv_heads * h / a wide: 2sbh + 4sb kv_dim instead of 6sbh
//   RMSNorm inputs: unchanged, 4 sbh.
// So with F = 4h and kv_dim = h the Llama block keeps s b h (34 + 5as/h) + 7sbh - sbh - 3as^2b
// = sbh (40 + 2as/h), and in general 2sb(6h + 2 kv_dim + 3F) + 2as^2b.
TEST_CASE("train ledger: per-block saved bytes reproduce Megatron's formula with the derived Llama terms") {
  const std::int64_t s = 2048;  // b = 1
  const ModelConfig mha{"gpt_like", 1024, 4096, 2, 16, 16, 1000};
  const double h = mha.dim, a = mha.heads, S = static_cast<double>(s);
  const double megatron = S * h * (34 + 5 * a * S / h);
  const double llama = megatron + 7 * S * h - S * h - 3 * a * S * S;
  const StepReport none = run(mha, nullptr, s, "bf16", "none", true, 2);
  for (std::size_t bytes : none.saved_bytes_per_block) CHECK(static_cast<double>(bytes) == llama);
  CHECK(llama == S * h * (40 + 2 * a * S / h));
  const StepReport full = run(mha, nullptr, s, "bf16", "full", true, 2);
  for (std::size_t bytes : full.saved_bytes_per_block) CHECK(static_cast<double>(bytes) == 2 * S * h);  // 2 s b h

  const ModelConfig gqa{"gqa", 1024, 2816, 2, 16, 4, 1000};
  const double kv = gqa.kv_dim(), F = gqa.hidden;
  const StepReport g = run(gqa, nullptr, s, "bf16", "none", true, 2);
  for (std::size_t bytes : g.saved_bytes_per_block) CHECK(static_cast<double>(bytes) == 2 * S * (6 * h + 2 * kv + 3 * F) + 2 * a * S * S);
}

TEST_CASE("train ledger: public model shapes, sequence 4096, micro-batch 1, 16-bit, in seconds") {
  for (const char* name : {"llama3.1-8b", "llama3.1-70b", "llama3.1-405b", "qwen2.5-72b"}) {
    const ModelConfig m = model_preset(name);
    for (const char* policy : {"none", "selective", "full"}) {
      const auto start = std::chrono::steady_clock::now();
      const StepReport r = run(m, nullptr, 4096, "bf16", policy, true, 2);
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::size_t block_peak = 0;
      for (const PhasePeaks& p : r.phases)
        if (p.name.starts_with("backward/L") || p.name.starts_with("forward/L")) block_peak = std::max(block_peak, p.peak_total);
      const double gib = 1024.0 * 1024.0 * 1024.0;
      WARN(name << " " << policy << ": saved activations per block " << r.saved_bytes_per_block[0] / gib << " GiB, all "
                << r.saved_activation_bytes / gib << " GiB; step peak " << r.peak_bytes_total / gib << " GiB (weights "
                << r.peak_bytes[0] / gib << ", gradients " << r.peak_bytes[2] / gib << "); recompute "
                << r.recompute_flops_fraction << " of step FLOPs; " << seconds << " s");
      CHECK(r.peak_bytes_total >= r.saved_activation_bytes);
      CHECK(block_peak <= r.peak_bytes_total);
    }
  }
}

TEST_CASE("train ledger: optimizer states add exactly their bytes to every peak, live the whole step") {
  // parameter_count against the checkpoint's own arrays (stories260K: every tensor it stores).
  const LlamaWeights& w = load_llama2c_checkpoint(find_data_file("stories260K/stories260K.bin"), kStories260kSha256);
  const ModelConfig stories = config_of(w);
  const std::size_t stored = w.token_embedding.size() + w.rms_att.size() + w.wq.size() + w.wk.size() + w.wv.size() +
                             w.wo.size() + w.rms_ffn.size() + w.w1.size() + w.w2.size() + w.w3.size() + w.rms_final.size();
  CHECK(parameter_count(stories) == static_cast<std::int64_t>(stored));

  // Llama-3.1 8B shapes-only, 16-bit tensors: FP32 masters + two FP32 moments = 12 bytes a parameter
  // (ZeRO's K = 12 for mixed-precision Adam), in the optimizer_state category.
  const ModelConfig m = model_preset("llama3.1-8b");
  for (const AttentionKind attention : {AttentionKind::naive, AttentionKind::flash}) {
    const StepReport without = run(m, nullptr, 4096, "bf16", "none", true, 2, attention);
    MemoryLedger ledger(nullptr);
    StepInput in{m, nullptr, {}, 4096, 2};
    in.attention = attention;
    in.optimizer = {4, 4, 2};
    const StepReport with = run_training_step(in, named_recipe("bf16"), make_policy("none", m, 4096, 2, attention), ledger).report;
    const auto bytes = static_cast<std::size_t>(12 * parameter_count(m));
    CHECK(with.peak_bytes[static_cast<std::size_t>(MemoryCategory::optimizer_state)] == bytes);
    CHECK(without.peak_bytes[static_cast<std::size_t>(MemoryCategory::optimizer_state)] == 0);
    CHECK(with.peak_bytes_total == without.peak_bytes_total + bytes);
    REQUIRE(with.phases.size() == without.phases.size());
    for (std::size_t i = 0; i < with.phases.size(); ++i) CHECK(with.phases[i].peak_total == without.phases[i].peak_total + bytes);
  }
}
