#pragma once
// Learning-rate schedules of a training run, for step s = 0 .. steps-1 (the rate step s uses):
//   constant:       lr
//   cosine:         s < warmup: lr * (s + 1) / warmup (linear warm-up, reaching lr at s = warmup - 1);
//                   then min_lr + (lr - min_lr) * (1 + cos(pi * (s - warmup) / (steps - warmup))) / 2,
//                   which is lr at s = warmup and approaches min_lr at the last step.
// Computed in double; the optimizer rounds what it derives from it (harness/train/adamw.hpp).
#include <cstdint>
#include <string>

namespace fp8lab::train {

struct LrSchedule {
  enum class Kind { constant, cosine };
  Kind kind = Kind::constant;
  double lr = 1e-3, min_lr = 0.0;
  std::int64_t warmup = 0, steps = 1;

  // Throws std::invalid_argument naming the field: lr not finite or <= 0, min_lr outside
  // [0, lr], warmup outside [0, steps), steps < 1.
  void validate() const;
  double at(std::int64_t step) const;
};

LrSchedule::Kind parse_lr_schedule(const std::string& text);  // throws std::invalid_argument
const char* lr_schedule_name(LrSchedule::Kind kind);

}  // namespace fp8lab::train
