#include "kernels/train/activation_policy.hpp"

#include <charconv>
#include <cmath>
#include <stdexcept>

namespace fp8lab::train {

const char* keep_name(Keep k) { return k == Keep::keep ? "keep" : k == Keep::fp8 ? "fp8" : "recompute"; }

bool BlockPlan::any_recompute() const {
  for (Keep k : saved)
    if (k == Keep::recompute) return true;
  return false;
}

bool BlockPlan::fully_recomputed() const {
  for (int s = 1; s < kSavedCount; ++s)
    if (saved[static_cast<std::size_t>(s)] != Keep::recompute) return false;
  return true;
}

std::int64_t kept_bytes(Saved s, Keep keep, const ModelConfig& model, std::int64_t tokens, int element_bytes,
                        AttentionKind attention) {
  const Shape shape = saved_shape(s, model, tokens, attention);
  if (keep == Keep::recompute) return 0;
  if (keep == Keep::keep) return shape.size() * element_bytes;
  return shape.size() + shape.rows * ((shape.cols + 127) / 128) * 4;
}

std::array<bool, kSavedCount> recompute_closure(const BlockPlan& plan, AttentionKind attention) {
  std::array<bool, kSavedCount> needed{};
  // Producers come before their outputs in Saved order, so one pass from the back suffices.
  // Under flash p and o share a producer (and its inputs), so marking one marks the other.
  const bool flash = attention == AttentionKind::flash;
  for (int s = kSavedCount - 1; s >= 1; --s) {
    const auto saved = static_cast<Saved>(s);
    if (plan[saved] != Keep::recompute && !needed[static_cast<std::size_t>(s)]) continue;
    needed[static_cast<std::size_t>(s)] = true;
    if (flash && (saved == Saved::p || saved == Saved::o))
      needed[static_cast<std::size_t>(Saved::p)] = needed[static_cast<std::size_t>(Saved::o)] = true;
    const Producer p = producer_of(saved, attention);
    for (int i = 0; i < p.input_count; ++i)
      if (plan[p.inputs[static_cast<std::size_t>(i)]] == Keep::recompute) needed[static_cast<std::size_t>(p.inputs[static_cast<std::size_t>(i)])] = true;
  }
  return needed;
}

double recompute_flops(const BlockPlan& plan, const ModelConfig& model, std::int64_t tokens, AttentionKind attention) {
  const auto needed = recompute_closure(plan, attention);
  double sum = 0;
  for (int s = 1; s < kSavedCount; ++s)
    if (needed[static_cast<std::size_t>(s)]) sum += producer_flops(static_cast<Saved>(s), model, tokens);
  return sum;
}

PlanFigures plan_figures(const ActivationPolicy& policy, const ModelConfig& c, std::int64_t T, int eb) {
  const AttentionKind at = policy.attention;
  double none_bytes = 0, kept = 0;
  int any = 0, full = 0;
  PlanFigures f;
  for (const BlockPlan& plan : policy.blocks) {
    for (int s = 0; s < kSavedCount; ++s) {
      none_bytes += static_cast<double>(kept_bytes(static_cast<Saved>(s), Keep::keep, c, T, eb, at));
      kept += static_cast<double>(kept_bytes(static_cast<Saved>(s), plan.saved[static_cast<std::size_t>(s)], c, T, eb, at));
    }
    f.recompute_flops += recompute_flops(plan, c, T, at);
    any += plan.any_recompute();
    full += plan.fully_recomputed();
  }
  f.activation_bytes_not_kept_fraction = 1.0 - kept / none_bytes;
  f.layers_recomputed_fraction = static_cast<double>(any) / c.layers;
  f.layers_fully_recomputed_fraction = static_cast<double>(full) / c.layers;
  return f;
}

namespace {

double parse_fraction(std::string_view spec, std::string_view text) {
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value))
    throw std::invalid_argument("policy '" + std::string(spec) + "': '" + std::string(text) + "' is not a number");
  if (value < 0 || value > 1)
    throw std::invalid_argument("policy '" + std::string(spec) + "': " + std::string(text) + " is outside [0, 1]");
  return value;
}

BlockPlan full_plan() {
  BlockPlan p;
  for (int s = 1; s < kSavedCount; ++s) p.saved[static_cast<std::size_t>(s)] = Keep::recompute;
  return p;
}

std::vector<BlockPlan> budget_plans(double fraction, const ModelConfig& m, std::int64_t T, int eb, AttentionKind at) {
  std::vector<BlockPlan> plans(static_cast<std::size_t>(m.layers));
  double total = 0;
  for (int s = 0; s < kSavedCount; ++s) total += static_cast<double>(kept_bytes(static_cast<Saved>(s), Keep::keep, m, T, eb, at));
  total *= m.layers;
  const double target = fraction * total;
  double kept = total;
  // Every block has the same shapes, so the block plans evolve identically; the greedy still
  // walks (block, tensor) candidates in order so that a budget cut inside a round falls on
  // the earlier blocks.
  while (kept > target) {
    double best_score = -1;
    int best_block = -1, best_saved = -1;
    for (int l = 0; l < m.layers; ++l) {
      const BlockPlan& plan = plans[static_cast<std::size_t>(l)];
      const double base = recompute_flops(plan, m, T, at);
      for (int s = 1; s < kSavedCount; ++s) {
        if (plan.saved[static_cast<std::size_t>(s)] == Keep::recompute) continue;
        BlockPlan trial = plan;
        trial.saved[static_cast<std::size_t>(s)] = Keep::recompute;
        const double added = recompute_flops(trial, m, T, at) - base;
        const double bytes = static_cast<double>(kept_bytes(static_cast<Saved>(s), Keep::keep, m, T, eb, at));
        const double score = added > 0 ? bytes / added : bytes * 1e300;
        if (score > best_score) {
          best_score = score;
          best_block = l;
          best_saved = s;
        }
      }
    }
    if (best_block < 0) break;  // only the x_in are left
    plans[static_cast<std::size_t>(best_block)].saved[static_cast<std::size_t>(best_saved)] = Keep::recompute;
    kept -= static_cast<double>(kept_bytes(static_cast<Saved>(best_saved), Keep::keep, m, T, eb, at));
  }
  return plans;
}

}  // namespace

ActivationPolicy make_policy(std::string_view spec, const ModelConfig& m, std::int64_t T, int element_bytes,
                             AttentionKind attention) {
  ActivationPolicy policy{std::string(spec), std::vector<BlockPlan>(static_cast<std::size_t>(m.layers)), 0, attention};
  const std::string expected = "': expected none, full, selective, deepseek, layers:r, budget:f, slices:S or tensors:t=k,...";
  const auto colon = spec.find(':');
  const std::string_view name = spec.substr(0, colon), arg = colon == std::string_view::npos ? "" : spec.substr(colon + 1);
  const bool takes_arg = name == "layers" || name == "budget" || name == "slices" || name == "tensors";
  if (takes_arg == (colon == std::string_view::npos))
    throw std::invalid_argument("policy '" + std::string(spec) + expected);
  if (name == "none") return policy;
  if (name == "full") {
    for (BlockPlan& b : policy.blocks) b = full_plan();
  } else if (name == "selective") {
    if (attention == AttentionKind::naive)  // flash stores no probabilities: nothing to drop (the header says why)
      for (BlockPlan& b : policy.blocks) b[Saved::p] = Keep::recompute;
  } else if (name == "deepseek") {
    for (BlockPlan& b : policy.blocks) {
      b[Saved::a] = b[Saved::b] = b[Saved::g] = Keep::recompute;
      b[Saved::o] = b[Saved::h1] = b[Saved::h3] = Keep::fp8;
    }
  } else if (name == "layers") {
    const double r = parse_fraction(spec, arg);
    const auto n = static_cast<int>(std::floor(r * m.layers + 0.5));
    for (int l = 0; l < n; ++l) policy.blocks[static_cast<std::size_t>(l)] = full_plan();
  } else if (name == "budget") {
    policy.blocks = budget_plans(parse_fraction(spec, arg), m, T, element_bytes, attention);
  } else if (name == "slices") {
    int s = 0;
    const auto [end, error] = std::from_chars(arg.data(), arg.data() + arg.size(), s);
    if (error != std::errc() || end != arg.data() + arg.size() || s <= 0 || T % s != 0)
      throw std::invalid_argument("policy '" + std::string(spec) + "': slices must be a positive divisor of the " +
                                  std::to_string(T) + " positions");
    policy.slices = s;
    for (BlockPlan& b : policy.blocks) b[Saved::b] = b[Saved::h1] = b[Saved::h3] = b[Saved::g] = Keep::recompute;
  } else if (name == "tensors") {
    BlockPlan plan;
    std::string_view rest = arg;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const std::string_view item = rest.substr(0, comma);
      rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      const auto eq = item.find('=');
      const std::string_view tensor = item.substr(0, eq), mode = eq == std::string_view::npos ? "" : item.substr(eq + 1);
      int found = -1;
      for (int s = 1; s < kSavedCount; ++s)
        if (tensor == saved_name(static_cast<Saved>(s))) found = s;
      if (tensor == "lse" && attention == AttentionKind::flash) found = static_cast<int>(Saved::p);
      if (found < 0)
        throw std::invalid_argument("policy '" + std::string(spec) + "': '" + std::string(tensor) +
                                    "' is not a saved tensor (a q k v p o x_mid b h1 h3 g, under flash attention p is "
                                    "the log-sum-exp, also named lse; x_in is always kept)");
      Keep keep = Keep::keep;
      if (mode == "fp8") keep = Keep::fp8;
      else if (mode == "recompute") keep = Keep::recompute;
      else if (mode != "keep")
        throw std::invalid_argument("policy '" + std::string(spec) + "': '" + std::string(mode) + "' for " +
                                    std::string(tensor) + " is not one of keep, fp8, recompute");
      plan.saved[static_cast<std::size_t>(found)] = keep;
    }
    for (BlockPlan& b : policy.blocks) b = plan;
  } else {
    throw std::invalid_argument("policy '" + std::string(spec) + expected);
  }
  return policy;
}

}  // namespace fp8lab::train
