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

}  // namespace fp8lab
