#pragma once
// Refusing work that cannot fit, before allocating it: a command estimates the bytes it will
// hold at its peak and compares them with what this machine can give (MemAvailable from
// /proc/meminfo, lowered by a cgroup v2 memory.max when one applies). A refusal names the
// field that made the request large and the flag that overrides the check.
#include <cstdint>
#include <string>

namespace fp8lab {

inline constexpr const char* kIgnoreMemoryLimitFlag = "--ignore-memory-limit";

// Bytes this process can expect to allocate; 0 when unknown (then nothing is refused).
std::uint64_t available_memory_bytes();

// Saturating arithmetic for estimates: a product that overflows is "more than any machine".
std::uint64_t saturating_mul(std::uint64_t a, std::uint64_t b);
std::uint64_t saturating_add(std::uint64_t a, std::uint64_t b);

// "12.3 GB"
std::string format_bytes(std::uint64_t bytes);

// Throws std::invalid_argument "WHAT needs about X but this machine has Y available; ...
// (--ignore-memory-limit to try anyway)" when `bytes` exceeds the available memory, unless
// `ignore` is set.
void require_memory(std::uint64_t bytes, const std::string& what, bool ignore);

}  // namespace fp8lab
