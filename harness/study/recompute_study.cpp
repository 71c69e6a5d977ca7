// Study kind "recompute": one training step (kernels/train) per point, under an activation
// policy and a precision recipe, on a model: the memory/compute trade-off of activation
// recomputation with the gradient error it costs (none for deterministic recompute; FP8
// caching measured), against the FP64 reference.
//
// Axes: model (stories260K: real checkpoint and its real greedy tokens, allocating run; a
// public preset llama3.1-8b/70b/405b, qwen2.5-72b: shapes-only), policy (activation_policy.hpp
// specs), cache (what precision the tensors a policy keeps are stored in: "policy" as the
// policy says; "compute": every FP8-cached tensor kept in the compute precision instead, which
// isolates FP8 caching; "fp8": also every kept linear-layer input a, o, b, g cached in FP8,
// 1x128 tiles, as DeepSeek-V3 caches them for Wgrad), recipe (a named recipe or a TOML file
// relative to the spec, experiments/recipes/), tokens (positions per step, micro-batch 1).
// Settings: [step] element_bytes (the counted width of every tensor in shapes-only points,
// default 2: 16-bit), shapes_only (run the stories260K points shapes-only too, default false),
// attention ("naive", the default, so that the committed figures stay reproducible: the
// probabilities are saved, or recomputed per the policy; "flash": the log-sum-exp is saved
// instead and backward recomputes the probabilities, kernels/train/attention_kind.hpp; recorded
// as the root attribute `attention`),
// optimizer ("none", the default; "adamw:fp32" or "adamw:bf16": AdamW's two moments in that
// format, and FP32 master weights beside steps whose tensors are narrower than 4 bytes, counted
// in the ledger's optimizer_state category so that peak_bytes_total is a whole training step's;
// recorded as the root attribute `optimizer`),
// metrics (comma-separated subset that must be measurable: asking a shapes-only point for an
// allocating-only metric is an error).
//
// Skipped points (invalid combinations, recorded with the reason): stories260K with more
// positions than its checkpoint's 512; a cache value that changes nothing for the policy
// (the point would repeat cache = "policy").
//
// Metrics: peak_bytes_<category> for every ledger category and peak_bytes_total,
// saved_activation_bytes (and per block), activation_bytes_not_kept_fraction,
// recompute_flops_fraction, layers_recomputed_fraction, layers_fully_recomputed_fraction,
// step_seconds, loss, grad_rel_frobenius (all weight gradients vs FP64), its per-block and
// per-weight-kind arrays, grad_rel_frobenius_vs_none (vs the `none` policy's gradients under
// the same recipe: 0 for deterministic recompute, the FP8 caching error otherwise).
// Allocating-only metrics are NaN at shapes-only points (the `operands` variable says which
// points are shapes-only). The per-block arrays run along the `block` dimension, sized to the
// largest model in the spec: a smaller model's entries beyond its layers are NaN.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "harness/train/llama2c_weights.hpp"
#include "harness/study/study_kind.hpp"
#include "harness/recipes/recipe_catalog.hpp"
#include "harness/recipes/recipe_toml.hpp"
#include "harness/metrics/train_step_errors.hpp"
#include "kernels/train/model_weights.hpp"
#include "kernels/train/training_step.hpp"

namespace fp8lab {
namespace {

using namespace fp8lab::train;

constexpr const char* kRealModel = "stories260K";
constexpr std::int64_t kRealPositions = 512;  // stories260K.bin's seq_len
const std::set<std::string> kAllocatingOnly = {"loss", "grad_rel_frobenius", "grad_rel_frobenius_per_block",
                                               "grad_rel_frobenius_per_weight", "grad_rel_frobenius_vs_none",
                                               "step_seconds"};
// The weight kinds of the per-weight array, in the order the model holds them.
const std::vector<std::string> kWeightKinds = {"embedding", "rms_att", "wq", "wk", "wv", "wo",
                                               "rms_ffn", "w1", "w2", "w3", "rms_final"};
// The saved tensors that are linear-layer inputs (what cache = "fp8" caches in FP8).
constexpr Saved kLinearInputs[] = {Saved::a, Saved::o, Saved::b, Saved::g};
const std::vector<std::string> kCacheValues = {"policy", "compute", "fp8"};

bool is_number(const std::string& v) { return !v.empty() && v.find_first_not_of("0123456789") == std::string::npos; }

// The policy with the cache axis applied; `changed` says whether it differs from the policy's own.
ActivationPolicy with_cache(ActivationPolicy policy, const std::string& cache, bool* changed = nullptr) {
  bool any = false;
  for (BlockPlan& block : policy.blocks) {
    if (cache == "compute") {
      for (Keep& k : block.saved)
        if (k == Keep::fp8) k = Keep::keep, any = true;
    } else if (cache == "fp8") {
      for (Saved s : kLinearInputs)
        if (block[s] == Keep::keep) block[s] = Keep::fp8, any = true;
    }
  }
  if (any) policy.spec += " cache=" + cache;
  if (changed) *changed = any;
  return policy;
}

class RecomputeStudy final : public StudyKind {
 public:
  std::string name() const override { return "recompute"; }

  std::vector<AxisDef> axes() const override {
    return {{"model", {kRealModel}, "model (stories260K: real weights and tokens; public presets: shapes only)"},
            {"policy", {"none"}, "activation policy (none, full, selective, deepseek, layers:r, budget:f, slices:S, tensors:...)"},
            {"cache", {"policy"}, "precision of kept activations (policy: as the policy says; compute: no FP8; fp8: linear inputs in FP8)"},
            {"recipe", {"fp32"}, "precision recipe (a named one or a TOML file)"},
            {"tokens", {"64"}, "positions per step (micro-batch 1)", AxisStorage::integer}};
  }

  void validate_value(const std::string& axis, const std::string& v) const override {
    if (axis == "model") model_preset(v);
    else if (axis == "tokens") {
      if (!is_number(v) || std::stoll(v) < 2 || std::stoll(v) > 1 << 20)
        throw std::invalid_argument("tokens '" + v + "' is not an integer in [2, 1048576]");
    } else if (axis == "policy" && !v.starts_with("slices:")) {
      // The spec's own checks (flash accepts what naive does and `lse`; check_grid checks
      // against step.attention); slices against tokens in check_grid.
      make_policy(v, model_preset(kRealModel), 64, 4, AttentionKind::flash);
    } else if (axis == "cache" && std::find(kCacheValues.begin(), kCacheValues.end(), v) == kCacheValues.end()) {
      throw std::invalid_argument("cache '" + v + "' is not one of policy, compute, fp8");
    }
    else if (axis == "recipe") recipe_file(v, {});  // an unknown name, refused listing the known ones
  }

  void configure(const StudySpec& spec) override {
    base_ = spec.file.parent_path();
    element_bytes_ = static_cast<int>(spec.get_int("step.element_bytes", 2));
    if (element_bytes_ != 1 && element_bytes_ != 2 && element_bytes_ != 4 && element_bytes_ != 8)
      throw spec.error("step.element_bytes", "must be 1, 2, 4 or 8");
    all_shapes_only_ = spec.get_int("step.shapes_only", 0) != 0;
    try {
      attention_ = parse_attention_kind(spec.get_string("step.attention", "naive"));
    } catch (const std::invalid_argument& e) {
      throw spec.error("step.attention", e.what());
    }
    const std::string optimizer = spec.get_string("step.optimizer", "none");
    if (optimizer == "none") optimizer_moment_bytes_ = 0;
    else if (optimizer == "adamw:fp32") optimizer_moment_bytes_ = 4;
    else if (optimizer == "adamw:bf16") optimizer_moment_bytes_ = 2;
    else throw spec.error("step.optimizer", "'" + optimizer + "' is not one of none, adamw:fp32, adamw:bf16");
    optimizer_ = optimizer;
    // The block dimension spans the largest model listed (unknown names are validate_value's to refuse).
    max_layers_ = model_preset(kRealModel).layers;
    for (const Axis& a : spec.axes)
      if (a.name == "model") {
        max_layers_ = 1;
        for (const std::string& v : a.values) try {
            max_layers_ = std::max(max_layers_, model_preset(v).layers);
          } catch (const std::invalid_argument&) {
          }
      }
    const std::string metrics = spec.get_string("step.metrics", "");
    std::stringstream in(metrics);
    for (std::string m; std::getline(in, m, ',');) {
      const auto columns = result_columns();
      if (std::none_of(columns.begin(), columns.end(), [&](const ColumnDef& c) { return c.name == m; }))
        throw spec.error("step.metrics", "'" + m + "' is not a metric of this study kind");
      requested_.insert(m);
    }
  }

  void check_grid(const StudySpec& spec, const std::vector<Point>& points) const override {
    for (const Point& p : points) {
      const ModelConfig model = model_preset(p.at("model"));
      const std::int64_t T = std::stoll(p.at("tokens"));
      try {
        policy(p, model, T);
      } catch (const std::invalid_argument& e) {
        throw spec.error("axes.policy", e.what());
      }
      // A TOML recipe's errors (unknown key, a layer this model lacks) name its file and field.
      const PrecisionRecipe r = recipe(p, spec);
      try {
        r.check_step_tokens(T, policy(p, model, T).slices);
      } catch (const std::invalid_argument& e) {
        throw spec.error("axes.tokens", e.what());
      }
      if (shapes_only(p))
        for (const std::string& m : requested_)
          if (kAllocatingOnly.contains(m))
            throw spec.error("step.metrics", "'" + m + "' needs an allocating run, and model " + p.at("model") +
                                                 " runs shapes-only (no weights, no arithmetic)");
    }
  }

  std::optional<std::string> skip_reason(const Point& p, const Backend&) const override {
    const std::int64_t T = std::stoll(p.at("tokens"));
    if (!shapes_only(p) && T > kRealPositions)
      return "stories260K's checkpoint has " + std::to_string(kRealPositions) + " positions, not " + p.at("tokens") +
             " (run it shapes-only with step.shapes_only = 1)";
    const std::string& cache = p.at("cache");
    if (cache == "policy") return std::nullopt;
    bool changed = false;
    with_cache(policy(p, model_preset(p.at("model")), T), cache, &changed);
    if (!changed)
      return "cache=" + cache + " changes nothing under policy " + p.at("policy") +
             (cache == "compute" ? " (it caches nothing in FP8)" : " (it keeps no linear-layer input a, o, b, g)") +
             ": the point equals cache=policy";
    return std::nullopt;
  }

  std::vector<ColumnDef> result_columns() const override {
    std::vector<ColumnDef> c;
    for (std::size_t k = 0; k < kMemoryCategories; ++k) {
      const std::string cat = memory_category_name(static_cast<MemoryCategory>(k));
      c.push_back({"peak_bytes_" + cat, ColumnDef::Type::f64, "B", "peak bytes of " + cat + " over the step"});
    }
    ExtraDimension block{"block", "transformer block (layer index); NaN beyond a model's layers", "1", {}, {}};
    for (int l = 0; l < max_layers_; ++l) block.numbers.push_back(l);
    ExtraDimension weight{"weight", "weight kind (every block's tensor of that kind together)", "1", {}, kWeightKinds};
    c.push_back({"peak_bytes_total", ColumnDef::Type::f64, "B", "peak bytes live at once over the step"});
    c.push_back({"saved_activation_bytes", ColumnDef::Type::f64, "B", "saved activations live at the end of forward"});
    c.push_back({"saved_activation_bytes_per_block", ColumnDef::Type::f64, "B",
                 "saved activation bytes each block adds (NaN beyond the model's layers: the block dimension spans "
                 "the largest model in the study)", block});
    c.push_back({"activation_bytes_not_kept_fraction", ColumnDef::Type::f64, "1", "fraction of none's activation bytes not kept"});
    c.push_back({"recompute_flops_fraction", ColumnDef::Type::f64, "1", "recompute FLOPs / step FLOPs without recompute"});
    c.push_back({"layers_recomputed_fraction", ColumnDef::Type::f64, "1", "fraction of blocks recomputing anything"});
    c.push_back({"layers_fully_recomputed_fraction", ColumnDef::Type::f64, "1", "fraction of blocks fully recomputed"});
    c.push_back({"step_seconds", ColumnDef::Type::f64, "s", "wall time of forward + backward (NaN: shapes-only)"});
    c.push_back({"loss", ColumnDef::Type::f64, "1", "next-token cross-entropy (NaN: shapes-only)"});
    c.push_back({"grad_rel_frobenius", ColumnDef::Type::f64, "1",
                 "all weight gradients vs FP64, relative Frobenius (NaN: shapes-only)"});
    c.push_back({"grad_rel_frobenius_per_block", ColumnDef::Type::f64, "1",
                 "each block's weight gradients vs FP64, relative Frobenius (NaN at shapes-only points and beyond "
                 "the model's layers: the block dimension spans the largest model in the study)", block});
    c.push_back({"grad_rel_frobenius_per_weight", ColumnDef::Type::f64, "1",
                 "each weight kind's gradients (all blocks together) vs FP64, relative Frobenius (NaN: shapes-only)",
                 weight});
    c.push_back({"grad_rel_frobenius_vs_none", ColumnDef::Type::f64, "1",
                 "FP8 caching error: all weight gradients vs policy none's under the same recipe, relative Frobenius "
                 "(0: recompute is deterministic; NaN: shapes-only)"});
    return c;
  }

  Row evaluate(const Point& p, const RunContext&) override {
    const ModelConfig model = model_preset(p.at("model"));
    const std::int64_t T = std::stoll(p.at("tokens"));
    const PrecisionRecipe r = recipe(p, std::nullopt);
    const ActivationPolicy plan = with_cache(policy(p, model, T), p.at("cache"));
    Row row = unmeasured_row();
    if (shapes_only(p)) {
      MemoryLedger ledger(nullptr);
      fill(row, run_training_step(input(model, nullptr, {}, T, element_bytes(p)), r, plan, ledger).report);
      return row;
    }
    const Real& real = real_inputs(T);
    HostAllocator host;
    MemoryLedger ledger(&host);
    const StepResult result = run_training_step(input(model, &real.weights, real.tokens), r, plan, ledger);
    fill(row, result.report);
    row["loss"] = result.report.loss;
    const GradientErrors e = gradient_errors(result.gradients, real.reference.gradients);
    row["grad_rel_frobenius"] = e.total_rel_frobenius;
    row["grad_rel_frobenius_per_block"] = per_block(e.block_rel_frobenius);
    std::vector<double> per_weight(kWeightKinds.size(), std::numeric_limits<double>::quiet_NaN());
    for (std::size_t k = 0; k < e.kind_names.size(); ++k) {
      const auto at = std::find(kWeightKinds.begin(), kWeightKinds.end(), e.kind_names[k]);
      if (at == kWeightKinds.end()) throw std::logic_error("recompute study: unlisted weight kind " + e.kind_names[k]);
      per_weight[static_cast<std::size_t>(at - kWeightKinds.begin())] = e.kind_rel_frobenius[k];
    }
    row["grad_rel_frobenius_per_weight"] = per_weight;
    HostAllocator none_host;
    MemoryLedger none_ledger(&none_host);
    const StepResult none =
        run_training_step(input(model, &real.weights, real.tokens), r, make_policy("none", model, T, 4, attention_), none_ledger);
    row["grad_rel_frobenius_vs_none"] = gradient_errors(result.gradients, none.gradients).total_rel_frobenius;
    return row;
  }

  // Nothing is known of a skipped point beyond its axes: the runner fills every column.
  Row skipped_row(const Point&) const override { return {}; }

  // The allocating step's own ledger, from a shapes-only run of the same schedule, plus the
  // FP64 reference (about the same again in doubles).
  MemoryEstimate memory_estimate(const Point& p) const override {
    if (shapes_only(p) || std::stoll(p.at("tokens")) > kRealPositions) return {};
    const ModelConfig model = model_preset(p.at("model"));
    const std::int64_t T = std::stoll(p.at("tokens"));
    MemoryLedger ledger(nullptr);
    const PrecisionRecipe r = recipe(p, std::nullopt);
    const int eb = r.fp64() ? 8 : 4;
    const StepReport report =
        run_training_step(input(model, nullptr, {}, T, eb), r, make_policy(p.at("policy"), model, T, eb, attention_), ledger).report;
    return {static_cast<std::uint64_t>(report.peak_bytes_total) * 3, "axes.tokens"};
  }

  std::string operand_description() const override {
    return "stories260K: the real checkpoint and its FP64 greedy continuation of BOS as tokens; public presets: shapes "
           "only, every tensor counted at step.element_bytes = " + std::to_string(element_bytes_) + " bytes";
  }

  std::string operand_provenance(const Point& p) const override {
    if (shapes_only(p)) {
      const ModelConfig m = model_preset(p.at("model"));
      return "shapes-only " + p.at("model") + " (dim " + std::to_string(m.dim) + ", " + std::to_string(m.layers) +
             " layers, " + std::to_string(m.heads) + "/" + std::to_string(m.kv_heads) + " heads, vocab " +
             std::to_string(m.vocab) + "): no weights, no tokens, no arithmetic; every tensor counted at " +
             std::to_string(element_bytes_) + " bytes; loss, step time and gradient errors not computed";
    }
    return "stories260K real: weights from checkpoint=" + find_data_file("stories260K/stories260K.bin").string() +
           " (sha256 " + kStories260kSha256 + "), tokens: the FP64 model's greedy continuation of BOS, " +
           p.at("tokens") + " positions (a function of those weights)";
  }

  std::map<std::string, std::string> settings_attributes() const override {
    return {{"attention", attention_kind_name(attention_)}, {"optimizer", optimizer_}};
  }

  double point_cost(const Point& p) const override {
    return shapes_only(p) ? 0.001 : static_cast<double>(std::stoll(p.at("tokens")));
  }

 private:
  struct Real {
    LlamaWeights weights;
    std::vector<int> tokens;
    ReferenceStep reference;
  };

  // Every column at its fill value (NaN), for evaluate to overwrite what it measures.
  Row unmeasured_row() const {
    Row row;
    for (const ColumnDef& c : result_columns())
      row[c.name] = c.extra ? Value(std::vector<double>(c.extra->size(), std::numeric_limits<double>::quiet_NaN()))
                            : Value(std::numeric_limits<double>::quiet_NaN());
    return row;
  }

  bool shapes_only(const Point& p) const { return all_shapes_only_ || p.at("model") != kRealModel; }
  ActivationPolicy policy(const Point& p, const ModelConfig& model, std::int64_t T) const {
    return make_policy(p.at("policy"), model, T, element_bytes(p), attention_);
  }
  StepInput input(const ModelConfig& model, const LlamaWeights* weights, std::vector<int> tokens, std::int64_t T = 0,
                  int eb = 0) const {
    StepInput in{model, weights, std::move(tokens), T, eb};
    in.attention = attention_;
    if (optimizer_moment_bytes_ > 0) {
      // FP32 masters only beside 16-bit (or narrower) step weights: FP32 and FP64 steps update their own.
      in.optimizer = {(eb == 0 ? 4 : eb) < 4 ? 4 : 0, optimizer_moment_bytes_, 2};
    }
    return in;
  }
  int element_bytes(const Point& p) const { return shapes_only(p) ? element_bytes_ : 4; }

  std::vector<double> per_block(const std::vector<double>& values) const {
    std::vector<double> v(static_cast<std::size_t>(max_layers_), std::numeric_limits<double>::quiet_NaN());
    std::copy_n(values.begin(), std::min(values.size(), v.size()), v.begin());
    return v;
  }

  PrecisionRecipe recipe(const Point& p, const std::optional<std::reference_wrapper<const StudySpec>>& spec) const {
    const std::string& v = p.at("recipe");
    const ModelConfig model = model_preset(p.at("model"));
    const auto file = recipe_file(v, base_);
    if (!file) {
      PrecisionRecipe r = named_recipe(v);
      try {
        r.validate(model);
      } catch (const std::invalid_argument& e) {
        if (spec) throw spec->get().error("axes.recipe", e.what());
        throw;
      }
      return r;
    }
    return load_recipe_toml(*file, model);
  }

  const Real& real_inputs(std::int64_t T) {
    auto it = real_.find(T);
    if (it != real_.end()) return it->second;
    Real r;
    r.weights = load_llama2c_checkpoint(find_data_file("stories260K/stories260K.bin"), kStories260kSha256);
    r.tokens = stories260k_greedy_tokens(r.weights, static_cast<int>(T));
    r.reference = reference_step(r.weights, r.tokens);
    return real_.emplace(T, std::move(r)).first->second;
  }

  void fill(Row& row, const StepReport& r) const {
    for (std::size_t k = 0; k < kMemoryCategories; ++k)
      row["peak_bytes_" + std::string(memory_category_name(static_cast<MemoryCategory>(k)))] = static_cast<double>(r.peak_bytes[k]);
    row["peak_bytes_total"] = static_cast<double>(r.peak_bytes_total);
    row["saved_activation_bytes"] = static_cast<double>(r.saved_activation_bytes);
    row["saved_activation_bytes_per_block"] =
        per_block(std::vector<double>(r.saved_bytes_per_block.begin(), r.saved_bytes_per_block.end()));
    row["activation_bytes_not_kept_fraction"] = r.activation_bytes_not_kept_fraction;
    row["recompute_flops_fraction"] = r.recompute_flops_fraction;
    row["layers_recomputed_fraction"] = r.layers_recomputed_fraction;
    row["layers_fully_recomputed_fraction"] = r.layers_fully_recomputed_fraction;
    if (!r.shapes_only) row["step_seconds"] = r.step_seconds;
  }

  std::filesystem::path base_;
  int element_bytes_ = 2;
  int optimizer_moment_bytes_ = 0;  // step.optimizer: 0 none, 4 adamw:fp32, 2 adamw:bf16
  std::string optimizer_ = "none";
  int max_layers_ = 5;
  bool all_shapes_only_ = false;
  AttentionKind attention_ = AttentionKind::naive;
  std::set<std::string> requested_;
  std::map<std::int64_t, Real> real_;
};

}  // namespace

std::unique_ptr<StudyKind> make_recompute_study() { return std::make_unique<RecomputeStudy>(); }

}  // namespace fp8lab
