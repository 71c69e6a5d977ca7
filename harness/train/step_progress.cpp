#include "harness/train/step_progress.hpp"

#include <unistd.h>

#include <cstdio>

#include "harness/runtime/progress.hpp"
#include "harness/train/training_record.hpp"

namespace fp8lab::train {

StepProgress::StepProgress(std::string what, std::int64_t steps, bool quiet, std::int64_t first_step)
    : what_(std::move(what)), steps_(steps), first_step_(first_step), quiet_(quiet), terminal_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()), last_(start_) {}

StepProgress::~StepProgress() {
  if (drawn_ && terminal_) std::fputc('\n', stderr);
}

std::string StepProgress::line(std::int64_t step, std::int64_t steps, double loss, double tokens_per_second,
                               double eta_seconds) {
  char text[160];
  std::snprintf(text, sizeof text, "step %lld/%lld loss %.4f %.0f tok/s ETA %s", static_cast<long long>(step),
                static_cast<long long>(steps), loss, tokens_per_second, clock_text(eta_seconds).c_str());
  return text;
}

void StepProgress::record(std::int64_t step, const StepRecord& r) {
  if (quiet_) return;
  const auto now = std::chrono::steady_clock::now();
  const bool last = step + 1 == steps_;
  const double since = std::chrono::duration<double>(now - last_).count();
  if (!last && since < (terminal_ ? 0.2 : 10.0)) return;
  last_ = now;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double eta = elapsed / static_cast<double>(step + 1 - first_step_) * static_cast<double>(steps_ - step - 1);
  const std::string text = what_ + ": " + line(step + 1, steps_, r.train_loss, r.tokens_per_second, eta);
  if (terminal_) {
    std::fprintf(stderr, "\r\033[K%s", text.substr(0, static_cast<std::size_t>(terminal_width() - 1)).c_str());
    drawn_ = true;
  } else {
    std::fprintf(stderr, "%s\n", text.c_str());
  }
  std::fflush(stderr);
}

}  // namespace fp8lab::train
