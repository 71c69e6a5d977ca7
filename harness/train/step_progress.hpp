#pragma once
// Progress of a training run on stderr: step of steps, loss, tokens/s and an ETA, as a live
// line on a terminal (redrawn at most every 0.2 s) or a line every 10 s in a log.
#include <chrono>
#include <cstdint>
#include <string>

namespace fp8lab::train {

struct StepRecord;

class StepProgress {
 public:
  // first_step: where a resumed run starts (its ETA counts the steps this command runs).
  StepProgress(std::string what, std::int64_t steps, bool quiet, std::int64_t first_step = 0);
  ~StepProgress();  // ends the live line
  void record(std::int64_t step, const StepRecord& r);
  // "step 12/200 loss 3.4100 1234 tok/s ETA 0:02:10" (the text shown after `what`).
  static std::string line(std::int64_t step, std::int64_t steps, double loss, double tokens_per_second, double eta_seconds);

 private:
  std::string what_;
  std::int64_t steps_, first_step_;
  bool quiet_, terminal_, drawn_ = false;
  std::chrono::steady_clock::time_point start_, last_;
};

}  // namespace fp8lab::train
