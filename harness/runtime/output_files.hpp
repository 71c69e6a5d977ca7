#pragma once
// Output files a command writes all or none of. Each is written under a temporary name in its
// own directory (FILE.tmp-PID, so the final rename cannot cross file systems); only when every
// one is written are they renamed into place. A failure, an exception or SIGINT/SIGTERM
// removes the temporaries: a failed command leaves no new file and no half-written one.
#include <filesystem>
#include <vector>

namespace fp8lab {

// Throws std::invalid_argument "FILE: ..." unless FILE could be created: its directory exists
// and is a directory, and FILE is not a directory, a device, a FIFO or a socket (the final
// rename would replace such a node with a plain file); a link, its target likewise (a loop is
// refused). Cheap; call before any work.
void require_writable_location(const std::filesystem::path& file);
// Whether two output names reach one file (through links, ./, .., an absolute spelling), whether
// it exists yet or not.
bool same_output_file(const std::filesystem::path& a, const std::filesystem::path& b);
// Throws std::invalid_argument "FILE: named twice as an output ..." when two of OUTPUTS are one
// file. Cheap; call before any work (PendingOutputs::add checks again).
void require_distinct_outputs(const std::vector<std::filesystem::path>& outputs);
// Throws std::invalid_argument "OUTPUT: is the input INPUT ..." when both name one existing file
// (through a link or another spelling too): a command never writes over what it reads.
void require_not_input(const std::filesystem::path& output, const std::filesystem::path& input);

class PendingOutputs {
 public:
  PendingOutputs() = default;
  PendingOutputs(const PendingOutputs&) = delete;
  PendingOutputs& operator=(const PendingOutputs&) = delete;
  ~PendingOutputs();  // removes every temporary not committed

  // Checks FILE's location now and returns the temporary name to write it under. A FILE that is
  // a symbolic link is written through: its target is the file replaced.
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
