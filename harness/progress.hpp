#pragma once
// Progress of a sweep on stderr: a live bar when stderr is a terminal, otherwise a line
// every few seconds (for logs). Points done of total, the current point, elapsed, ETA.
#include <chrono>
#include <cstdint>
#include <string>

namespace fp8lab {

class Progress {
 public:
  Progress(std::int64_t total, bool quiet);
  void begin_point(std::int64_t done, const std::string& description);
  void finish(std::int64_t done);

 private:
  void print(std::int64_t done, bool force);
  std::int64_t total_;
  bool quiet_, terminal_;
  std::string current_;
  std::chrono::steady_clock::time_point start_, last_line_;
};

}  // namespace fp8lab
