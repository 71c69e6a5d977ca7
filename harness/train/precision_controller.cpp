#include "harness/train/precision_controller.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "kernels/train/flop_count.hpp"

namespace fp8lab::train {

namespace {

using Statistic = PrecisionControllerConfig::Statistic;

std::string number(double x) {
  std::ostringstream out;
  out << x;
  return out.str();
}

int kind_index(GemmKind kind) { return kind == GemmKind::fprop ? 0 : kind == GemmKind::dgrad ? 1 : 2; }

// Whether a measured value says the GEMM should leave its current precision (the header's table).
// NaN compares false everywhere, but observe() skips it before asking.
bool leaves(Statistic statistic, bool high, double value, double low, double upper) {
  const bool low_is_bad = statistic == Statistic::sqnr;
  if (!high) return low_is_bad ? value < low : value > upper;
  return low_is_bad ? value > upper : value < low;
}

}  // namespace

const char* adaptive_statistic_name(Statistic statistic) {
  switch (statistic) {
    case Statistic::sqnr: return "sqnr";
    case Statistic::grad_noise: return "grad_noise";
  }
  return "?";
}

Statistic parse_adaptive_statistic(const std::string& text) {
  for (Statistic s : {Statistic::sqnr, Statistic::grad_noise})
    if (text == adaptive_statistic_name(s)) return s;
  throw std::invalid_argument("adaptive_statistic: '" + text + "' is not one of sqnr, grad_noise");
}

void PrecisionControllerConfig::validate() const {
  if (every < 1) throw std::invalid_argument("adaptive_every: must be at least 1, not " + std::to_string(every));
  if (statistic != Statistic::sqnr && statistic != Statistic::grad_noise)
    throw std::invalid_argument("adaptive_statistic: must be sqnr or grad_noise");
  if (!std::isfinite(band_low)) throw std::invalid_argument("adaptive_low: must be a finite number, not " + number(band_low));
  if (!std::isfinite(band_high))
    throw std::invalid_argument("adaptive_high: must be a finite number, not " + number(band_high));
  // An empty band would let one value send a GEMM both ways; equal edges leave no hysteresis.
  if (!(band_low < band_high))
    throw std::invalid_argument("adaptive_low: must be below adaptive_high (" + number(band_low) + " >= " + number(band_high) + ")");
  if (statistic == Statistic::grad_noise && band_low < 0)
    throw std::invalid_argument("adaptive_low: grad_noise is a ratio of norms, at least 0; " + number(band_low) +
                                " would never send a GEMM back to FP8");
  if (patience < 1) throw std::invalid_argument("adaptive_patience: must be at least 1, not " + std::to_string(patience));
}

double gemm_statistic(Statistic statistic, const GemmOperandTally& tally) {
  constexpr double nan = std::numeric_limits<double>::quiet_NaN();
  if (statistic == Statistic::sqnr) {
    const double a = tally.a.sqnr_db(), b = tally.b.sqnr_db();
    return std::isnan(a) || std::isnan(b) ? nan : std::min(a, b);
  }
  // The gradient is operand A of Dgrad (dY) and Wgrad (dY^T); Fprop has none.
  if (tally.kind == GemmKind::fprop || tally.a.elements == 0) return nan;
  return std::sqrt(tally.a.noise / tally.a.signal);  // 0/0 -> NaN; x/0 -> inf (bad side)
}

PrecisionController::PrecisionController(PrecisionControllerConfig config, PrecisionRecipe base,
                                         std::vector<std::string> layers, GemmPrecision high)
    : config_(config), base_(std::move(base)), layers_(std::move(layers)), high_(high) {
  config_.validate();
  using K = GemmPrecision::Kind;
  if (high_.kind != K::bf16 && high_.kind != K::fp16 && high_.kind != K::fp32)
    throw std::invalid_argument(std::string("precision controller: the high precision must be bf16, fp16 or fp32, not ") +
                                gemm_precision_kind_name(high_.kind));
  if (layers_.empty()) throw std::invalid_argument("precision controller: no linear layers to schedule");
  for (std::size_t l = 0; l < layers_.size(); ++l)
    if (!index_.emplace(layers_[l], l).second)
      throw std::invalid_argument("precision controller: layer '" + layers_[l] + "' is listed twice");
  gemms_.resize(3 * layers_.size());
  for (std::size_t l = 0; l < layers_.size(); ++l)
    for (GemmKind k : kGemmKinds) {
      const bool measured = !(config_.statistic == Statistic::grad_noise && k == GemmKind::fprop);
      gemms_[3 * l + kind_index(k)].switchable = measured && base_.resolve(layers_[l], k).kind == K::fp8;
    }
}

std::size_t PrecisionController::layer_index(const std::string& layer) const {
  const auto it = index_.find(layer);
  if (it == index_.end()) throw std::invalid_argument("precision controller: layer '" + layer + "' is not scheduled");
  return it->second;
}

void PrecisionController::observe(std::int64_t step, const std::vector<GemmOperandTally>& tallies) {
  if (!due(step))
    throw std::invalid_argument("precision controller: step " + std::to_string(step) + " is not due (every " +
                                std::to_string(config_.every) + ")");
  // Observing a step twice would count one measurement as two evaluations toward the patience.
  if (step <= last_step_)
    throw std::invalid_argument("precision controller: step " + std::to_string(step) + " comes after step " +
                                std::to_string(last_step_) + ", which was observed");
  // Checked in full before anything changes, so a refused call leaves the state as it was.
  std::vector<const GemmOperandTally*> measured(gemms_.size(), nullptr);
  for (const GemmOperandTally& t : tallies) {
    const std::size_t g = 3 * layer_index(t.layer) + kind_index(t.kind);
    if (measured[g])
      throw std::invalid_argument("precision controller: two tallies of " + std::string(gemm_kind_name(t.kind)) +
                                  " of " + t.layer);
    measured[g] = &t;
  }
  for (std::size_t g = 0; g < gemms_.size(); ++g) {
    Gemm& gemm = gemms_[g];
    if (!gemm.switchable || !measured[g]) continue;
    const double value = gemm_statistic(config_.statistic, *measured[g]);
    if (std::isnan(value)) continue;
    if (!leaves(config_.statistic, gemm.high, value, config_.band_low, config_.band_high)) {
      gemm.streak = 0;
      continue;
    }
    if (++gemm.streak < config_.patience) continue;
    gemm.high = !gemm.high;
    gemm.streak = 0;
    switches_.push_back({step, layers_[g / 3], kGemmKinds[g % 3], value, !gemm.high});
  }
  last_step_ = step;
}

PrecisionRecipe PrecisionController::current() const {
  PrecisionRecipe recipe = base_;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    LayerOverride o{layers_[l], {}, {}, {}};
    std::optional<GemmPrecision>* slots[] = {&o.fprop, &o.dgrad, &o.wgrad};
    for (int k = 0; k < 3; ++k)
      if (gemms_[3 * l + k].high) *slots[k] = high_;
    // The requantize_transposed repair (header): Wgrad stays FP8 but quantizes its transposes itself.
    const GemmPrecision& wgrad = base_.resolve(layers_[l], GemmKind::wgrad);
    if (!o.wgrad && wgrad.kind == GemmPrecision::Kind::fp8 && wgrad.requantize_transposed && (o.fprop || o.dgrad)) {
      o.wgrad = wgrad;
      o.wgrad->requantize_transposed = false;
    }
    if (o.fprop || o.dgrad || o.wgrad) recipe.overrides.push_back(std::move(o));
  }
  return recipe;
}

bool PrecisionController::in_high_precision(const std::string& layer, GemmKind kind) const {
  return gemms_[3 * layer_index(layer) + kind_index(kind)].high;
}

double PrecisionController::fp8_flop_fraction(const ModelConfig& model, std::int64_t tokens) const {
  // A layer the model lacks would go unnoticed while it sits in FP8 (no override names it).
  const std::vector<std::string> names = linear_layer_names(model);
  for (const std::string& layer : layers_)
    if (std::find(names.begin(), names.end(), layer) == names.end())
      throw std::invalid_argument("fp8_flop_fraction: the controller schedules layer '" + layer + "', which model " +
                                  model.name + " lacks");
  return train::fp8_flop_fraction(current(), model, tokens);
}

double fp8_flop_fraction(const PrecisionRecipe& recipe, const ModelConfig& model, std::int64_t tokens) {
  if (tokens < 1) throw std::invalid_argument("fp8_flop_fraction: tokens must be at least 1, not " + std::to_string(tokens));
  model.validate();
  recipe.validate(model);
  double fp8 = 0, all = 0;
  for (const std::string& layer : linear_layer_names(model)) {
    const auto [out, in] = linear_layer_shape(model, layer);
    const double per_gemm = flops::gemm(static_cast<double>(tokens), static_cast<double>(out), static_cast<double>(in));  // the same for all three kinds
    for (GemmKind k : kGemmKinds) {
      all += per_gemm;
      if (recipe.resolve(layer, k).kind == GemmPrecision::Kind::fp8) fp8 += per_gemm;
    }
  }
  return fp8 / all;
}

PrecisionControllerState PrecisionController::state() const {
  PrecisionControllerState s;
  s.last_step = last_step_;
  for (const Gemm& g : gemms_) {
    s.high.push_back(g.high ? 1 : 0);
    s.streak.push_back(g.streak);
  }
  for (const PrecisionSwitch& w : switches_)
    s.switches.push_back({w.step, static_cast<std::int64_t>(3 * layer_index(w.layer)) + kind_index(w.kind), w.statistic,
                          w.to_fp8 ? 1 : 0});
  return s;
}

void PrecisionController::restore(const PrecisionControllerState& s) {
  const auto refuse = [](const std::string& what) {
    throw std::invalid_argument("precision controller state: " + what);
  };
  const std::size_t n = gemms_.size();
  if (s.high.size() != n || s.streak.size() != n)
    refuse(std::to_string(s.high.size()) + " flags and " + std::to_string(s.streak.size()) + " streaks for " +
           std::to_string(n) + " GEMMs (3 per layer)");
  if (s.last_step != -1 && !due(s.last_step)) refuse("last step " + std::to_string(s.last_step) + " is not a due step");
  for (std::size_t g = 0; g < n; ++g) {
    const std::string which = std::string(gemm_kind_name(kGemmKinds[g % 3])) + " of " + layers_[g / 3];
    if (s.high[g] != 0 && s.high[g] != 1) refuse(which + ": flag " + std::to_string(s.high[g]) + " is not 0 or 1");
    if (s.high[g] == 1 && !gemms_[g].switchable) refuse(which + " is never switched, yet in high precision");
    if (s.streak[g] < 0 || s.streak[g] >= config_.patience)
      refuse(which + ": streak " + std::to_string(s.streak[g]) + " outside [0, patience " +
             std::to_string(config_.patience) + ")");
  }
  std::vector<PrecisionSwitch> log;
  for (const PrecisionControllerState::Switch& w : s.switches) {
    if (w.gemm < 0 || w.gemm >= static_cast<std::int64_t>(n)) refuse("switch names GEMM " + std::to_string(w.gemm));
    if (w.step < 0 || w.step > s.last_step) refuse("switch at step " + std::to_string(w.step) + " outside the steps observed");
    if (w.to_fp8 != 0 && w.to_fp8 != 1) refuse("switch direction " + std::to_string(w.to_fp8) + " is not 0 or 1");
    log.push_back({w.step, layers_[static_cast<std::size_t>(w.gemm) / 3], kGemmKinds[w.gemm % 3], w.statistic, w.to_fp8 == 1});
  }
  for (std::size_t g = 0; g < n; ++g) {
    gemms_[g].high = s.high[g] == 1;
    gemms_[g].streak = s.streak[g];
  }
  last_step_ = s.last_step;
  switches_ = std::move(log);
}

}  // namespace fp8lab::train
