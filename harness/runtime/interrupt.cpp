#include "harness/runtime/interrupt.hpp"

#include <signal.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstring>

namespace fp8lab {
namespace {

// Fixed buffers: a signal handler may only read memory that no allocation can move.
constexpr std::size_t kPathBytes = 4096;
constexpr std::size_t kSlots = 8;
std::array<char, kPathBytes> g_note{};
std::array<std::array<char, kPathBytes>, kSlots> g_temporaries{};
std::array<std::atomic<bool>, kSlots> g_in_use{};
bool g_terminal = false;  // stderr is a terminal (set before the handlers are installed)
std::atomic<bool> g_deferring{false};
std::atomic<int> g_pending{0};  // the deferred signal, 0 when none

void write_text(const char* text) {
  std::size_t left = std::strlen(text);
  while (left > 0) {
    const ssize_t n = ::write(STDERR_FILENO, text, left);
    if (n <= 0) return;
    text += n;
    left -= static_cast<std::size_t>(n);
  }
}

[[noreturn]] void stop_now(int signal) {
  for (std::size_t i = 0; i < kSlots; ++i)
    if (g_in_use[i].load()) ::unlink(g_temporaries[i].data());
  // On a terminal the progress line is cleared first, so the message starts a clean line.
  write_text(g_terminal ? "\r\x1b[K" : "");
  write_text(signal == SIGINT ? "fp8lab: interrupted (SIGINT)" : "fp8lab: terminated (SIGTERM)");
  write_text(g_note.data());
  write_text("\n");
  ::_exit(128 + signal);
}

extern "C" void on_signal(int signal) {
  int none = 0;  // the first signal while deferring is recorded; any other stops at once
  if (g_deferring.load() && g_pending.compare_exchange_strong(none, signal)) {
    write_text(g_terminal ? "\r\x1b[K" : "");
    write_text("fp8lab: stopping at the end of this step to write a checkpoint (again to stop at once)\n");
    return;
  }
  stop_now(signal);
}

void copy_bounded(std::array<char, kPathBytes>& to, const std::string& from) {
  const std::size_t n = std::min(from.size(), kPathBytes - 1);
  std::memcpy(to.data(), from.data(), n);
  to[n] = '\0';
}

}  // namespace

void install_interrupt_handlers() {
  g_terminal = ::isatty(STDERR_FILENO) == 1;
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;  // a deferred signal returns to the code it interrupted: resume its system calls
  ::sigaction(SIGINT, &action, nullptr);
  ::sigaction(SIGTERM, &action, nullptr);
}

void defer_interrupts(bool on) {
  if (on) g_pending.store(0);
  g_deferring.store(on);
}

bool interrupt_requested() { return g_pending.load() != 0; }

void exit_interrupted() { stop_now(g_pending.load() != 0 ? g_pending.load() : SIGINT); }

void set_interrupt_note(const std::string& note) {
  // Blocked while the buffer changes, so the handler never prints half of it.
  sigset_t block, previous;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  ::pthread_sigmask(SIG_BLOCK, &block, &previous);
  copy_bounded(g_note, note);
  ::pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

void register_temporary_file(const std::filesystem::path& file) {
  for (std::size_t i = 0; i < kSlots; ++i)
    if (!g_in_use[i].load()) {
      copy_bounded(g_temporaries[i], file.string());
      g_in_use[i].store(true);
      return;
    }
}

void unregister_temporary_file(const std::filesystem::path& file) {
  for (std::size_t i = 0; i < kSlots; ++i)
    if (g_in_use[i].load() && file.string() == g_temporaries[i].data()) g_in_use[i].store(false);
}

}  // namespace fp8lab
