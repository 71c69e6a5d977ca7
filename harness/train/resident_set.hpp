#pragma once
// The process's resident set (physical memory in use), to set beside the ledger's peak: the
// ledger counts the tensors the engine asks for; the resident set is what the machine gives the
// whole process (code, libraries, the token stream, allocator slack and fragmentation too).
// Linux only (/proc/self/status and /proc/self/clear_refs); elsewhere every figure reads 0.
#include <cstddef>

namespace fp8lab::train {

struct ResidentSet {
  std::size_t current_bytes = 0;  // VmRSS
  std::size_t peak_bytes = 0;     // VmHWM: the high-water mark since the process started or the last reset
};

ResidentSet read_resident_set();

// Sets the high-water mark to the current resident set (clear_refs "5", Linux >= 4.0), so that
// the next read_resident_set().peak_bytes is the peak of what ran in between. False where the
// kernel refuses it (the peak then stays the process's).
bool reset_resident_peak();

}  // namespace fp8lab::train
