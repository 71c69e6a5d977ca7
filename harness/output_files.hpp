#pragma once
// Output files a command writes all or none of. Each is written under a temporary name in its
// own directory (FILE.tmp-PID, so the final rename cannot cross file systems); only when every
// one is written are they renamed into place. A failure, an exception or SIGINT/SIGTERM
// removes the temporaries: a failed command leaves no new file and no half-written one.
#include <filesystem>
#include <vector>

namespace fp8lab {

// Throws std::invalid_argument "FILE: ..." unless FILE could be created: its directory exists
// and is a directory, and FILE itself is not a directory. Cheap; call before any work.
void require_writable_location(const std::filesystem::path& file);

class PendingOutputs {
 public:
  PendingOutputs() = default;
  PendingOutputs(const PendingOutputs&) = delete;
  PendingOutputs& operator=(const PendingOutputs&) = delete;
  ~PendingOutputs();  // removes every temporary not committed

  // Checks FILE's location now and returns the temporary name to write it under.
  std::filesystem::path add(const std::filesystem::path& file);
  // Renames every temporary to its final name.
  void commit();

 private:
  struct Entry {
    std::filesystem::path final_name, temporary;
  };
  std::vector<Entry> entries_;
};

}  // namespace fp8lab
