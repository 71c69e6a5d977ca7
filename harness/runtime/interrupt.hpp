#pragma once
// SIGINT / SIGTERM: the command stops at once (as SIGKILL would: results files are flushed
// after every point, so nothing finished is lost), removes the temporary files it registered,
// prints one line (what was interrupted and how to go on) and exits 128 + the signal number.
#include <filesystem>
#include <string>

namespace fp8lab {

void install_interrupt_handlers();

// The line printed after "fp8lab: interrupted"; e.g. "; results/x.h5 is resumable: ...".
void set_interrupt_note(const std::string& note);

// Files removed when a signal ends the command (a temporary that would be left behind).
void register_temporary_file(const std::filesystem::path& file);
void unregister_temporary_file(const std::filesystem::path& file);

// A command that can stop cleanly at a boundary (a training run at the end of a step, where it
// writes a checkpoint) defers the first signal while `on`: the handler records it and says it
// will stop there; the command polls interrupt_requested() and then calls exit_interrupted().
// A second signal stops at once, as without deferral.
// Switching it on forgets a signal deferred before (it was acted on, or belongs to no boundary).
void defer_interrupts(bool on);
bool interrupt_requested();
[[noreturn]] void exit_interrupted();  // as the handler would have: temporaries, the note, 128 + signal

// defer_interrupts(true) for a scope, false again however the scope ends (exceptions included).
class DeferredInterrupts {
 public:
  explicit DeferredInterrupts(bool on) : on_(on) { defer_interrupts(on); }
  ~DeferredInterrupts() {
    if (on_) defer_interrupts(false);
  }
  DeferredInterrupts(const DeferredInterrupts&) = delete;
  DeferredInterrupts& operator=(const DeferredInterrupts&) = delete;

 private:
  bool on_;
};

}  // namespace fp8lab
