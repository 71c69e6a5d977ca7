#include "harness/requests/memory_budget.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

namespace fp8lab {
namespace {

constexpr std::uint64_t kUnknown = 0;

std::uint64_t meminfo_available() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (in >> key >> kib >> unit)
    if (key == "MemAvailable:") return saturating_mul(kib, 1024);
  return kUnknown;
}

// cgroup v2: memory.max ("max" or bytes) less memory.current of this process's cgroup.
std::uint64_t cgroup_available() {
  std::ifstream self("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(self, line))
    if (line.starts_with("0::")) path = line.substr(3);
  if (path.empty()) return kUnknown;
  const std::string dir = "/sys/fs/cgroup" + path;
  std::ifstream max_file(dir + "/memory.max"), current_file(dir + "/memory.current");
  std::string max_text;
  std::uint64_t current = 0;
  if (!(max_file >> max_text) || max_text == "max" || !(current_file >> current)) return kUnknown;
  std::uint64_t max = 0;
  std::istringstream(max_text) >> max;
  return max > current ? max - current : 1;
}

}  // namespace

std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<std::uint64_t>::max() : r;
}

std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b) {
  std::uint64_t r = 0;
  return __builtin_add_overflow(a, b, &r) ? std::numeric_limits<std::uint64_t>::max() : r;
}

std::uint64_t available_memory_bytes() {
  const std::uint64_t system = meminfo_available(), group = cgroup_available();
  if (system == kUnknown) return group;
  if (group == kUnknown) return system;
  return std::min(system, group);
}

std::string format_bytes(std::uint64_t bytes) {
  char text[48];
  if (bytes == std::numeric_limits<std::uint64_t>::max()) return "more than 16 EB";
  const double b = static_cast<double>(bytes);
  if (b >= 1e12) std::snprintf(text, sizeof text, "%.1f TB", b / 1e12);
  else if (b >= 1e9) std::snprintf(text, sizeof text, "%.1f GB", b / 1e9);
  else std::snprintf(text, sizeof text, "%.1f MB", b / 1e6);
  return text;
}

void require_memory(std::uint64_t bytes, const std::string& what, bool ignore) {
  if (ignore) return;
  const std::uint64_t available = available_memory_bytes();
  if (available == kUnknown || bytes <= available) return;
  throw std::invalid_argument(what + " needs about " + format_bytes(bytes) + " of memory but this machine has " +
                              format_bytes(available) + " available (" + kIgnoreMemoryLimitFlag +
                              " to try anyway)");
}

}  // namespace fp8lab
