#include "harness/progress.hpp"

#include <unistd.h>

#include <cstdio>

namespace fp8lab {
namespace {

constexpr double kLogInterval = 5.0;  // seconds between lines when stderr is not a terminal

std::string clock(double seconds) {
  const auto s = static_cast<long>(seconds + 0.5);
  char text[32];
  std::snprintf(text, sizeof text, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  return text;
}

}  // namespace

Progress::Progress(std::int64_t total, bool quiet)
    : total_(total), quiet_(quiet), terminal_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()), last_line_(start_) {}

void Progress::begin_point(std::int64_t done, const std::string& description) {
  current_ = description;
  print(done, done == 0);
}

void Progress::finish(std::int64_t done) {
  current_ = "done";
  print(done, true);
  if (terminal_ && !quiet_) std::fputc('\n', stderr);
}

void Progress::print(std::int64_t done, bool force) {
  if (quiet_) return;
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  if (!terminal_ && !force && std::chrono::duration<double>(now - last_line_).count() < kLogInterval) return;
  last_line_ = now;
  const double eta = done > 0 ? elapsed / static_cast<double>(done) * static_cast<double>(total_ - done) : 0.0;
  const std::string eta_text = done > 0 ? clock(eta) : "?";
  if (terminal_) {
    constexpr int kWidth = 30;
    const int filled = total_ > 0 ? static_cast<int>(kWidth * done / total_) : kWidth;
    std::fprintf(stderr, "\r[%.*s%*s] %lld/%lld  elapsed %s  eta %s  %.60s\x1b[K", filled,
                 "##############################", kWidth - filled, "", static_cast<long long>(done),
                 static_cast<long long>(total_), clock(elapsed).c_str(), eta_text.c_str(), current_.c_str());
  } else {
    std::fprintf(stderr, "fp8lab: %lld/%lld points, elapsed %s, eta %s, now: %s\n", static_cast<long long>(done),
                 static_cast<long long>(total_), clock(elapsed).c_str(), eta_text.c_str(), current_.c_str());
  }
  std::fflush(stderr);
}

}  // namespace fp8lab
