#pragma once
// Progress of a sweep on stderr: a live line when stderr is a terminal (cut to its width),
// otherwise a line every few seconds (for logs). Points done of total, elapsed, an ETA that
// weights each point by its cost (StudyKind::point_cost, e.g. FLOPs: a sweep whose last points
// are its largest is not promised early), and the current point as axis=value pairs.
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace fp8lab {

class Progress {
 public:
  Progress(std::int64_t total_points, double total_cost, bool quiet);
  // Point `done` (0-based) starts; `cost_done` is the cost of the points before it.
  void begin_point(std::int64_t done, double cost_done, const std::vector<std::pair<std::string, std::string>>& point);
  void finish(std::int64_t done);

  // "a=1 b=x ..." cut to at most `width` characters, whole pairs only ("..." marks a cut).
  static std::string describe(const std::vector<std::pair<std::string, std::string>>& point, std::size_t width);
  // Seconds left when `cost_done` of `total_cost` took `elapsed` (negative: unknown yet).
  static double eta_seconds(double elapsed, double cost_done, double total_cost);

 private:
  void print(std::int64_t done, bool force);
  std::int64_t total_;
  double total_cost_, cost_done_ = 0;
  bool quiet_, terminal_;
  std::vector<std::pair<std::string, std::string>> current_;
  bool finished_ = false;
  std::chrono::steady_clock::time_point start_, last_line_;
};

// Elapsed time on stderr while one long computation runs (fp8lab gemm / quantize): nothing for
// the first seconds, then a live line on a terminal or a line every few seconds otherwise.
// Ends (and clears its line) when destroyed.
class Heartbeat {
 public:
  static constexpr double kDefaultDelay = 10.0;  // seconds: a shorter computation prints nothing
  Heartbeat(std::string what, bool quiet, double delay_seconds = kDefaultDelay);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

std::string clock_text(double seconds);  // H:MM:SS
int terminal_width();                     // of stderr; 80 when unknown

}  // namespace fp8lab
