#include "harness/train/lr_schedule.hpp"

#include <cmath>
#include <numbers>
#include <stdexcept>

namespace fp8lab::train {

void LrSchedule::validate() const {
  if (!std::isfinite(lr) || lr <= 0) throw std::invalid_argument("lr: must be finite and > 0");
  if (steps < 1) throw std::invalid_argument("steps: must be >= 1");
  if (kind == Kind::cosine) {
    if (!std::isfinite(min_lr) || min_lr < 0 || min_lr > lr) throw std::invalid_argument("min_lr: must be in [0, lr]");
    if (warmup < 0 || warmup >= steps) throw std::invalid_argument("warmup: must be in [0, steps)");
  }
}

double LrSchedule::at(std::int64_t step) const {
  if (kind == Kind::constant) return lr;
  if (step < warmup) return lr * static_cast<double>(step + 1) / static_cast<double>(warmup);
  const double progress = static_cast<double>(step - warmup) / static_cast<double>(steps - warmup);
  return min_lr + (lr - min_lr) * (1.0 + std::cos(std::numbers::pi * progress)) / 2.0;
}

LrSchedule::Kind parse_lr_schedule(const std::string& text) {
  if (text == "constant") return LrSchedule::Kind::constant;
  if (text == "cosine") return LrSchedule::Kind::cosine;
  throw std::invalid_argument("schedule '" + text + "' is not one of constant, cosine");
}

const char* lr_schedule_name(LrSchedule::Kind kind) { return kind == LrSchedule::Kind::constant ? "constant" : "cosine"; }

}  // namespace fp8lab::train
