// Study kind "zero_memory" (ZeRO sharding, one of the seed techniques): what one data-parallel rank
// holds in one training step, so that "what fits on one 80 GB GPU" is one table: the model states
// (weights, gradients, optimizer states) under ZeRO stage 0..3 across N ranks, from the ZeRO
// paper's formulas extended to the recipes' own precisions (harness/train/zero_sharding.hpp),
// beside the activation and workspace bytes of one step under an activation-recompute policy, from
// the same shapes-only engine run the recompute study makes (kernels/train/training_step.hpp).
//
// Axes: model (a preset of kernels/train/model_config.hpp, every one shapes-only; or
// "params:PSI", a bare parameter count such as params:7.5e9 or params:1e12, for the paper's
// example and for claims about models fp8lab has no shapes of: model states only), zero_stage
// (0..3), ranks (N >= 1), states (a named state-precision set: paper, bf16_moments,
// fp8_weights_fp8_moments), policy (activation policies as the recompute study takes them),
// tokens (positions per step, micro-batch 1).
// Settings: [step] attention ("flash", the default: what a model of this size trains with; under
// flash `selective` keeps what `none` keeps, activation_policy.hpp), recipe (a named recipe,
// default "bf16": an FP8 recipe adds its operand copies to the GEMM workspace), element_bytes
// (the counted width of every activation, default 2). All three are root attributes.
//
// Parameters: the presets' true counts. The engine ties the classifier to the embedding; the
// public Llama 3.1 and Qwen2.5 checkpoints have a separate one, which the model states count
// (8,030,261,248 parameters for Llama 3.1 8B), while the activation bytes are the engine
// step's (the logits are the same either way).
//
// Columns (bytes are exact integers): parameters, weight_bytes_per_rank,
// gradient_bytes_per_rank, optimizer_bytes_per_rank, model_state_bytes_per_rank (their sum),
// activation_bytes (the step's peak of everything but the model states: saved activations,
// workspace, recomputed tensors, GEMM operand copies), total_bytes_per_rank (the two added),
// fits_80gb (1 when total_bytes_per_rank <= 80e9). ZeRO does not change activations here
// (ZeRO-R's partitioned activations, stage-3 gather buffers and gradient buckets are not
// counted, as in the paper's formulas). A params:PSI point has no shapes to run a step on: its
// activation_bytes, total_bytes_per_rank and fits_80gb are left missing (the fill value), and it
// repeats along policy and tokens.
#include <algorithm>
#include <map>
#include <set>

#include "harness/study/integer_axis_value.hpp"
#include "harness/study/study_kind.hpp"
#include "harness/train/zero_sharding.hpp"
#include "kernels/train/training_step.hpp"

namespace fp8lab {
namespace {

using namespace fp8lab::train;

constexpr const char* kParamsPrefix = "params:";
// "80 GB" in the paper's decimal gigabytes, below the 80 GiB (85.9e9 bytes) an H100 80GB has:
// the ledger does not count the CUDA context, communication buffers or allocator fragmentation,
// so the few GB between the two stand in for them rather than being called free.
constexpr std::int64_t kDeviceBytes = 80'000'000'000;
// Presets whose public checkpoint has its own classifier (config.json: tie_word_embeddings false).
const std::set<std::string> kSeparateClassifier = {"llama3.1-8b", "llama3.1-70b", "llama3.1-405b", "qwen2.5-72b"};

// "params:7.5e9" -> 7500000000: digits, an optional fraction and decimal exponent, whose value
// must be a whole number in 1 .. kMaxParameters. Throws std::invalid_argument naming the model field.
std::int64_t parse_parameter_count(const std::string& value) {
  const std::string text = value.substr(std::string(kParamsPrefix).size());
  const auto bad = [&](const std::string& why) {
    return std::invalid_argument("model '" + value + "': " + why +
                                 " (params:PSI takes a whole parameter count, e.g. params:7.5e9, params:1e12)");
  };
  const std::size_t e = text.find_first_of("eE");
  const std::string mantissa = text.substr(0, e);
  const std::string exponent = e == std::string::npos ? "0" : text.substr(e + 1);
  const std::size_t dot = mantissa.find('.');
  std::string digits = mantissa;
  int scale = 0;
  if (dot != std::string::npos) {
    digits = mantissa.substr(0, dot) + mantissa.substr(dot + 1);
    scale = -static_cast<int>(mantissa.size() - dot - 1);
  }
  const auto all_digits = [](const std::string& s, std::size_t most) {
    return !s.empty() && s.size() <= most && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!all_digits(digits, 18) || !all_digits(exponent, 2)) throw bad("not a number");
  scale += std::stoi(exponent);
  std::int64_t count = std::stoll(digits);
  for (; scale < 0; ++scale) {
    if (count % 10 != 0) throw bad("not a whole number");
    count /= 10;
  }
  for (; scale > 0 && count <= kMaxParameters; --scale) count *= 10;
  if (count < 1 || count > kMaxParameters) throw bad("outside 1 .. 1e15");
  return count;
}

bool is_parameter_count(const std::string& model) { return model.starts_with(kParamsPrefix); }

class ZeroMemoryStudy final : public StudyKind {
 public:
  std::string name() const override { return "zero_memory"; }

  std::vector<AxisDef> axes() const override {
    return {{"model", {"llama3.1-8b"}, "model (a public preset, shapes-only; params:PSI: a bare parameter count)"},
            {"zero_stage", {"0", "1", "2", "3"}, "ZeRO stage (0: nothing sharded; 1: optimizer states; 2: + gradients; 3: + weights)",
             AxisStorage::integer},
            {"ranks", {"8"}, "data-parallel ranks N sharing the model states", AxisStorage::integer},
            {"states", {"paper"}, "bytes per parameter of weights / gradients / optimizer states (a named set)"},
            {"policy", {"none"}, "activation policy (none, full, selective, deepseek, layers:r, budget:f, slices:S, tensors:...)"},
            {"tokens", {"4096"}, "positions per step (micro-batch 1)", AxisStorage::integer}};
  }

  void validate_value(const std::string& axis, const std::string& v) const override {
    if (axis == "model") {
      if (is_parameter_count(v)) {
        parse_parameter_count(v);
      } else {
        try {
          model_preset(v);
        } catch (const std::invalid_argument& e) {
          throw std::invalid_argument(std::string(e.what()) + ", nor params:PSI (a bare parameter count)");
        }
      }
    } else if (axis == "zero_stage") {
      parse_zero_stage(v);
    } else if (axis == "ranks") {
      parse_ranks(v);
    } else if (axis == "states") {
      state_precision(v);
    } else if (axis == "tokens") {
      const std::int64_t t = parse_integer_axis_value("tokens", v);
      if (t < 2 || t > 1 << 20) throw std::invalid_argument("tokens '" + v + "' is not an integer in [2, 1048576]");
    } else if (axis == "policy" && !v.starts_with("slices:")) {
      // As the recompute study checks it: the spec's own grammar here (flash accepts what naive
      // does and `lse`), against the step's attention, model and tokens in check_grid.
      make_policy(v, model_preset("stories260K"), 64, 4, AttentionKind::flash);
    }
  }

  void configure(const StudySpec& spec) override {
    try {
      attention_ = parse_attention_kind(spec.get_string("step.attention", "flash"));
    } catch (const std::invalid_argument& e) {
      throw spec.error("step.attention", e.what());
    }
    recipe_name_ = spec.get_string("step.recipe", "bf16");
    try {
      named_recipe(recipe_name_);
    } catch (const std::invalid_argument& e) {
      throw spec.error("step.recipe", e.what());
    }
    element_bytes_ = static_cast<int>(spec.get_int("step.element_bytes", 2));
    if (element_bytes_ != 1 && element_bytes_ != 2 && element_bytes_ != 4 && element_bytes_ != 8)
      throw spec.error("step.element_bytes", "must be 1, 2, 4 or 8");
  }

  void check_grid(const StudySpec& spec, const std::vector<Point>& points) const override {
    for (const Point& p : points) {
      if (is_parameter_count(p.at("model"))) continue;
      const ModelConfig model = model_preset(p.at("model"));
      const std::int64_t T = std::stoll(p.at("tokens"));
      ActivationPolicy plan;
      try {
        plan = policy(p, model, T);
      } catch (const std::invalid_argument& e) {
        throw spec.error("axes.policy", e.what());
      }
      const PrecisionRecipe r = named_recipe(recipe_name_);
      try {
        r.validate(model);
      } catch (const std::invalid_argument& e) {
        throw spec.error("step.recipe", e.what());
      }
      try {
        r.check_step_tokens(T, plan.slices);
      } catch (const std::invalid_argument& e) {
        throw spec.error("axes.tokens", e.what());
      }
    }
  }

  std::optional<std::string> skip_reason(const Point&, const Backend&) const override { return std::nullopt; }

  std::vector<ColumnDef> result_columns() const override {
    using T = ColumnDef::Type;
    return {{"parameters", T::i64, "1", "trained parameters Psi (the public checkpoint's, classifier included)"},
            {"weight_bytes_per_rank", T::i64, "B", "bytes of weights one rank holds (scales included)"},
            {"gradient_bytes_per_rank", T::i64, "B", "bytes of gradients one rank holds"},
            {"optimizer_bytes_per_rank", T::i64, "B", "bytes of optimizer states one rank holds (master weights, moments, scales)"},
            {"model_state_bytes_per_rank", T::i64, "B", "bytes of model states one rank holds (weights + gradients + optimizer)"},
            {"activation_bytes", T::i64, "B",
             "peak bytes of one step without model states (activations, workspace, recompute, GEMM copies)"},
            {"total_bytes_per_rank", T::i64, "B", "model states per rank + activation bytes"},
            {"fits_80gb", T::i64, "1", "1 when total_bytes_per_rank <= 80e9 bytes, else 0"}};
  }

  Row evaluate(const Point& p, const RunContext&) override {
    const std::string& name = p.at("model");
    const StatePrecision states = state_precision(p.at("states"));
    Row row;
    ModelStateBytes whole;
    std::int64_t activation = kMissingInteger;
    if (is_parameter_count(name)) {
      const std::int64_t psi = parse_parameter_count(name);
      row["parameters"] = psi;
      whole = model_state_bytes(psi, states);
    } else {
      const std::vector<ParameterTensor> tensors = parameter_tensors(model_preset(name), kSeparateClassifier.contains(name));
      row["parameters"] = parameter_count(tensors);
      whole = model_state_bytes(tensors, states);
      activation = activation_bytes(p);
    }
    const ModelStateBytes rank = zero_bytes_per_rank(whole, parse_zero_stage(p.at("zero_stage")), parse_ranks(p.at("ranks")));
    row["weight_bytes_per_rank"] = rank.weights;
    row["gradient_bytes_per_rank"] = rank.gradients;
    row["optimizer_bytes_per_rank"] = rank.optimizer;
    row["model_state_bytes_per_rank"] = rank.total();
    row["activation_bytes"] = activation;
    const bool known = activation != kMissingInteger;
    row["total_bytes_per_rank"] = known ? rank.total() + activation : kMissingInteger;
    row["fits_80gb"] = known ? static_cast<std::int64_t>(rank.total() + activation <= kDeviceBytes) : kMissingInteger;
    return row;
  }

  Row skipped_row(const Point&) const override { return {}; }

  std::string operand_description() const override {
    return "no operands: model states from parameter shapes (or a bare count, params:PSI) and named state precisions; "
           "activation bytes from a shapes-only step, every activation counted at step.element_bytes = " +
           std::to_string(element_bytes_) + " bytes";
  }

  std::string operand_provenance(const Point& p) const override {
    const std::string& name = p.at("model");
    if (is_parameter_count(name))
      return "parameter count only: " + std::to_string(parse_parameter_count(name)) +
             " parameters, no shapes (scales counted per flat 128x128 block / 1x128 group), no step run";
    const ModelConfig m = model_preset(name);
    return "shapes-only " + name + " (dim " + std::to_string(m.dim) + ", " + std::to_string(m.layers) + " layers, " +
           std::to_string(m.heads) + "/" + std::to_string(m.kv_heads) + " heads, vocab " + std::to_string(m.vocab) +
           (kSeparateClassifier.contains(name) ? ", separate classifier counted in the model states" : ", tied classifier") +
           "): no weights, no tokens, no arithmetic; activations counted at " + std::to_string(element_bytes_) + " bytes";
  }

  std::map<std::string, std::string> settings_attributes() const override {
    return {{"attention", attention_kind_name(attention_)},
            {"recipe", recipe_name_},
            {"element_bytes", std::to_string(element_bytes_)},
            {"device_bytes", std::to_string(kDeviceBytes)}};
  }

  double point_cost(const Point&) const override { return 0.001; }

 private:
  ActivationPolicy policy(const Point& p, const ModelConfig& model, std::int64_t T) const {
    return make_policy(p.at("policy"), model, T, element_bytes_, attention_);
  }

  // The recompute study's shapes-only step (no optimizer states: those are the model states
  // counted above). Setup allocates the step's weights and gradients once, at their full size,
  // and they stay live to its end, so at every moment the live total is they plus the rest: the
  // rest's peak is the peak total less them. The same step recurs along zero_stage, ranks and
  // states, so it runs once per model, policy and tokens.
  std::int64_t activation_bytes(const Point& p) {
    const std::string key = p.at("model") + ";" + p.at("policy") + ";" + p.at("tokens");
    if (const auto it = activation_.find(key); it != activation_.end()) return it->second;
    const ModelConfig model = model_preset(p.at("model"));
    const std::int64_t T = std::stoll(p.at("tokens"));
    StepInput in{model, nullptr, {}, T, element_bytes_};
    in.attention = attention_;
    MemoryLedger ledger(nullptr);
    const StepReport r = run_training_step(in, named_recipe(recipe_name_), policy(p, model, T), ledger).report;
    const auto peak = [&](MemoryCategory c) { return r.peak_bytes[static_cast<std::size_t>(c)]; };
    const std::size_t states = peak(MemoryCategory::weights) + peak(MemoryCategory::gradients) + peak(MemoryCategory::optimizer_state);
    const auto bytes = static_cast<std::int64_t>(r.peak_bytes_total - states);
    activation_.emplace(key, bytes);
    return bytes;
  }

  AttentionKind attention_ = AttentionKind::flash;
  std::string recipe_name_ = "bf16";
  int element_bytes_ = 2;
  std::map<std::string, std::int64_t> activation_;
};

}  // namespace

std::unique_ptr<StudyKind> make_zero_memory_study() { return std::make_unique<ZeroMemoryStudy>(); }

}  // namespace fp8lab
