#include "harness/runtime/progress.hpp"

#include <sys/ioctl.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace fp8lab {
namespace {

constexpr double kLogInterval = 5.0;        // seconds between lines when stderr is not a terminal

}  // namespace

std::string clock_text(double seconds) {
  const auto s = static_cast<long>(seconds + 0.5);
  char text[32];
  std::snprintf(text, sizeof text, "%ld:%02ld:%02ld", s / 3600, (s / 60) % 60, s % 60);
  return text;
}

int terminal_width() {
  winsize size{};
  if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &size) == 0 && size.ws_col > 0) return size.ws_col;
  if (const char* columns = std::getenv("COLUMNS"); columns && std::atoi(columns) > 0) return std::atoi(columns);
  return 80;
}

std::string Progress::describe(const std::vector<std::pair<std::string, std::string>>& point, std::size_t width) {
  std::string out;
  for (std::size_t i = 0; i < point.size(); ++i) {
    const std::string pair = (out.empty() ? "" : " ") + point[i].first + "=" + point[i].second;
    const bool last = i + 1 == point.size();
    // Room for " ..." unless this is the last pair.
    if (out.size() + pair.size() + (last ? 0 : 4) > width) return out + (out.empty() ? "..." : " ...");
    out += pair;
  }
  return out;
}

double Progress::eta_seconds(double elapsed, double cost_done, double total_cost) {
  if (cost_done <= 0) return -1;
  return elapsed / cost_done * std::max(total_cost - cost_done, 0.0);
}

Progress::Progress(std::int64_t total_points, double total_cost, bool quiet)
    : total_(total_points), total_cost_(total_cost), quiet_(quiet), terminal_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()), last_line_(start_) {}

void Progress::begin_point(std::int64_t done, double cost_done,
                           const std::vector<std::pair<std::string, std::string>>& point) {
  current_ = point;
  cost_done_ = cost_done;
  print(done, done == 0);
}

void Progress::finish(std::int64_t done) {
  finished_ = true;
  cost_done_ = total_cost_;
  print(done, true);
  if (terminal_ && !quiet_) std::fputc('\n', stderr);
}

void Progress::print(std::int64_t done, bool force) {
  if (quiet_) return;
  const auto now = std::chrono::steady_clock::now();
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  if (!terminal_ && !force && std::chrono::duration<double>(now - last_line_).count() < kLogInterval) return;
  last_line_ = now;
  const double eta = finished_ ? 0.0 : eta_seconds(elapsed, cost_done_, total_cost_);
  const std::string eta_text = eta >= 0 ? clock_text(eta) : "?";
  char head[160];
  if (terminal_) {
    constexpr int kWidth = 20;
    const int filled = total_ > 0 ? static_cast<int>(kWidth * done / total_) : kWidth;
    std::snprintf(head, sizeof head, "[%.*s%*s] %lld/%lld  elapsed %s  eta %s  ", filled, "####################",
                  kWidth - filled, "", static_cast<long long>(done), static_cast<long long>(total_),
                  clock_text(elapsed).c_str(), eta_text.c_str());
    const std::size_t width = static_cast<std::size_t>(terminal_width());
    const std::size_t room = width > std::string(head).size() + 1 ? width - std::string(head).size() - 1 : 0;
    const std::string now_text = finished_ ? "done" : describe(current_, room);
    std::fprintf(stderr, "\r%s%s\x1b[K", head, now_text.c_str());
  } else {
    std::string now_text = finished_ ? "done" : describe(current_, std::string::npos);
    std::fprintf(stderr, "fp8lab: %lld/%lld points, elapsed %s, eta %s, now: %s\n", static_cast<long long>(done),
                 static_cast<long long>(total_), clock_text(elapsed).c_str(), eta_text.c_str(), now_text.c_str());
  }
  std::fflush(stderr);
}

struct Heartbeat::State {
  std::string what;
  bool terminal = false, stop = false, printed = false;
  std::mutex mutex;
  std::condition_variable wake;
  std::thread thread;
};

Heartbeat::Heartbeat(std::string what, bool quiet, double delay_seconds) {
  if (quiet) return;
  state_ = std::make_unique<State>();
  state_->what = std::move(what);
  state_->terminal = ::isatty(STDERR_FILENO) == 1;
  state_->thread = std::thread([s = state_.get(), delay_seconds] {
    const auto start = std::chrono::steady_clock::now();
    std::unique_lock lock(s->mutex);
    auto next = start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(delay_seconds));
    while (!s->wake.wait_until(lock, next, [s] { return s->stop; })) {
      const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (s->terminal) std::fprintf(stderr, "\r%s: running, elapsed %s\x1b[K", s->what.c_str(), clock_text(elapsed).c_str());
      else std::fprintf(stderr, "fp8lab: %s: running, elapsed %s\n", s->what.c_str(), clock_text(elapsed).c_str());
      std::fflush(stderr);
      s->printed = true;
      next += std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(s->terminal ? 1.0 : kLogInterval));
    }
  });
}

Heartbeat::~Heartbeat() {
  if (!state_) return;
  {
    std::lock_guard lock(state_->mutex);
    state_->stop = true;
  }
  state_->wake.notify_all();
  state_->thread.join();
  if (state_->printed && state_->terminal) {
    std::fputs("\r\x1b[K", stderr);
    std::fflush(stderr);
  }
}

}  // namespace fp8lab
