// The resident-set reader that training runs record beside the ledger's peak: the high-water
// mark must see memory touched after a reset, and a reset must forget it once it is freed.
#include <catch2/catch.hpp>
#include <cstring>
#include <memory>

#include "harness/train/resident_set.hpp"

using namespace fp8lab::train;

TEST_CASE("resident set: the high-water mark sees touched memory and a reset forgets freed memory") {
  const ResidentSet before = read_resident_set();
  if (before.current_bytes == 0) SUCCEED("this OS reports no resident set");
  if (before.current_bytes == 0) return;
  CHECK(before.peak_bytes >= before.current_bytes);
  if (!reset_resident_peak()) {  // a kernel that refuses clear_refs: runs then record the process's mark
    WARN("/proc/self/clear_refs refused: the high-water mark cannot be reset here");
    return;
  }
  constexpr std::size_t kBytes = std::size_t{64} << 20;
  {
    // Written through, so every page is resident (an untouched allocation is not).
    const auto block = std::make_unique<unsigned char[]>(kBytes);
    std::memset(block.get(), 0x5A, kBytes);
    const ResidentSet touched = read_resident_set();
    CHECK(touched.current_bytes >= before.current_bytes + kBytes / 2);
    CHECK(touched.peak_bytes >= touched.current_bytes);
    CHECK(block[kBytes - 1] == 0x5A);
  }
  // A 64 MiB block is returned to the OS on free (glibc maps it on its own), so after a reset
  // the mark is back near where it started: at least a quarter of the block below the peak.
  // Not under AddressSanitizer, whose allocator keeps freed blocks in quarantine.
  REQUIRE(reset_resident_peak());
#if defined(__SANITIZE_ADDRESS__)
  WARN("AddressSanitizer build: freed memory stays in its quarantine, so the reset is not checked");
  return;
#endif
  const ResidentSet after = read_resident_set();
  CHECK(after.peak_bytes + kBytes / 4 < before.current_bytes + kBytes);
}
