#include "harness/train/resident_set.hpp"

#include <fstream>
#include <sstream>
#include <string>

namespace fp8lab::train {

ResidentSet read_resident_set() {
  ResidentSet r;
  std::ifstream status("/proc/self/status");
  std::string line;
  // Lines such as "VmHWM:\t  218408 kB": kibibytes, whatever the page size.
  while (std::getline(status, line)) {
    std::size_t* field = line.rfind("VmRSS:", 0) == 0 ? &r.current_bytes : line.rfind("VmHWM:", 0) == 0 ? &r.peak_bytes : nullptr;
    if (field == nullptr) continue;
    std::istringstream value(line.substr(6));
    std::size_t kib = 0;
    if (value >> kib) *field = kib * 1024;
  }
  return r;
}

bool reset_resident_peak() {
  std::ofstream clear_refs("/proc/self/clear_refs");
  if (!clear_refs) return false;
  clear_refs << "5";
  clear_refs.flush();
  return static_cast<bool>(clear_refs);
}

}  // namespace fp8lab::train
