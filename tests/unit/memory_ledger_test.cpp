// The device-memory ledger: exact live and peak bytes per category and in total, the same
// numbers in shapes-only mode, buffers returned when destroyed or moved from.
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "kernels/memory_ledger.hpp"

using namespace fp8lab;

namespace {

// A forward/backward-like sequence: weights, saved activations, workspace freed early, gradients.
void run_sequence(MemoryLedger& ledger) {
  DeviceBuffer w = ledger.allocate(1000, MemoryCategory::weights);
  DeviceBuffer a1 = ledger.allocate(300, MemoryCategory::saved_activations);
  {
    DeviceBuffer ws = ledger.allocate(5000, MemoryCategory::workspace);  // peak total 6300 here
  }
  DeviceBuffer a2 = ledger.allocate(200, MemoryCategory::saved_activations);  // activations peak 500
  a1 = DeviceBuffer();                                                          // released by move-assign
  DeviceBuffer g = ledger.allocate(1000, MemoryCategory::gradients);
  CHECK(ledger.live_total() == 1000 + 200 + 1000);
}

}  // namespace

TEST_CASE("memory ledger: live and peak bytes per category and in total") {
  HostAllocator host;
  MemoryLedger ledger(&host);
  run_sequence(ledger);
  CHECK(ledger.live_total() == 0);
  CHECK(ledger.peak_total() == 6300);  // 1000 + 300 + 5000, not the sum of per-category peaks
  CHECK(ledger.peak(MemoryCategory::weights) == 1000);
  CHECK(ledger.peak(MemoryCategory::saved_activations) == 500);
  CHECK(ledger.peak(MemoryCategory::workspace) == 5000);
  CHECK(ledger.peak(MemoryCategory::gradients) == 1000);
  CHECK(ledger.live(MemoryCategory::saved_activations) == 0);
  CHECK(ledger.summary().find("workspace: live 0 B, peak 5000 B") != std::string::npos);
}

TEST_CASE("memory ledger: shapes-only mode gives the same numbers without allocating") {
  HostAllocator host;
  MemoryLedger real(&host), shapes(nullptr);
  run_sequence(real);
  run_sequence(shapes);
  CHECK(shapes.shapes_only());
  for (std::size_t c = 0; c < kMemoryCategories; ++c)
    CHECK(shapes.peak(static_cast<MemoryCategory>(c)) == real.peak(static_cast<MemoryCategory>(c)));
  CHECK(shapes.peak_total() == real.peak_total());
  // A DeepSeek-V3 o_proj weight in FP8 (7168 x 16384 bytes) costs nothing to account for.
  const DeviceBuffer big = shapes.allocate(std::size_t{7168} * 16384, MemoryCategory::weights);
  CHECK(big.data() == nullptr);
  CHECK(shapes.live(MemoryCategory::weights) == std::size_t{7168} * 16384);
}

TEST_CASE("memory ledger: host buffers are real, aligned, and counted exactly under threads") {
  HostAllocator host;
  MemoryLedger ledger(&host);
  {
    DeviceBuffer b = ledger.allocate(100, MemoryCategory::other);
    REQUIRE(b.data() != nullptr);
    CHECK(reinterpret_cast<std::uintptr_t>(b.data()) % 256 == 0);
    static_cast<unsigned char*>(b.data())[99] = 7;  // the memory is usable
    DeviceBuffer moved = std::move(b);
    CHECK(b.data() == nullptr);
    CHECK(ledger.live_total() == 100);
  }
  CHECK(ledger.live_total() == 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) DeviceBuffer b = ledger.allocate(64, MemoryCategory::workspace);
    });
  for (auto& t : threads) t.join();
  CHECK(ledger.live_total() == 0);
  CHECK(ledger.peak(MemoryCategory::workspace) <= 4 * 64);
  CHECK(ledger.peak(MemoryCategory::workspace) >= 64);
}

TEST_CASE("memory ledger: phases record their own peaks from what is live when they begin") {
  MemoryLedger ledger(nullptr);
  DeviceBuffer w = ledger.allocate(1000, MemoryCategory::weights);
  ledger.begin_phase("forward");
  DeviceBuffer a = ledger.allocate(300, MemoryCategory::saved_activations);
  { DeviceBuffer ws = ledger.allocate(50, MemoryCategory::workspace); }
  ledger.begin_phase("backward");
  a = DeviceBuffer();
  DeviceBuffer g = ledger.allocate(100, MemoryCategory::gradients);
  const std::vector<PhasePeaks> p = ledger.phases();
  REQUIRE(p.size() == 2);
  CHECK(p[0].name == "forward");
  CHECK(p[0].peak_total == 1350);
  CHECK(p[0].peak_of(MemoryCategory::weights) == 1000);  // live at the start counts
  CHECK(p[0].peak_of(MemoryCategory::workspace) == 50);
  CHECK(p[1].peak_total == 1300);                        // 1000 + 300 live when it began
  CHECK(p[1].peak_of(MemoryCategory::gradients) == 100);
  CHECK(p[1].peak_of(MemoryCategory::saved_activations) == 300);
  CHECK(std::string(memory_category_name(MemoryCategory::recompute_workspace)) == "recompute_workspace");
}

TEST_CASE("memory ledger: clear_phases forgets the phases and keeps the peaks") {
  // A training run calls it before every sequence: without it each step's phases stayed in the
  // ledger for the whole run (the resident set grew 2.35x the ledger's peak over 600 steps).
  MemoryLedger ledger(nullptr);
  DeviceBuffer w = ledger.allocate(1000, MemoryCategory::weights);
  ledger.begin_phase("forward");
  { DeviceBuffer a = ledger.allocate(300, MemoryCategory::saved_activations); }
  ledger.begin_phase("backward");
  REQUIRE(ledger.phases().size() == 2);
  ledger.clear_phases();
  CHECK(ledger.phases().empty());
  CHECK(ledger.peak_total() == 1300);
  CHECK(ledger.peak(MemoryCategory::saved_activations) == 300);
  CHECK(ledger.live_total() == 1000);
  ledger.begin_phase("next step");  // a phase after the clear starts from what is live
  DeviceBuffer g = ledger.allocate(10, MemoryCategory::gradients);
  const std::vector<PhasePeaks> p = ledger.phases();
  REQUIRE(p.size() == 1);
  CHECK(p[0].name == "next step");
  CHECK(p[0].peak_total == 1010);
}
