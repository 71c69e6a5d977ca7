// The ledger on a GPU (DESIGN.md section 3): what it counts is what cudaMalloc took.
// cudaMemGetInfo is device-wide and cudaMalloc rounds each allocation up (2 MiB pages for
// large ones), so for n buffers of B bytes the device-wide growth g must satisfy
//   n B <= g <= n (B + 2 MiB) + slack,
// with slack for the context's own lazy allocations (one 2 MiB page per buffer at most, and
// 64 MiB once); freeing them returns the ledger's live bytes to where they were.
#include <catch2/catch.hpp>

#include "kernels/cuda/cuda_allocator.hpp"

using namespace fp8lab;

TEST_CASE("gpu: the memory ledger's live bytes match cudaMemGetInfo's growth within derived slack") {
  cuda::CudaAllocator allocator;
  MemoryLedger ledger(&allocator);
  constexpr std::size_t kBuffers = 8, kBytes = 96u << 20, kPage = 2u << 20, kOnce = 64u << 20;
  const std::size_t before = cuda::device_memory_in_use();
  {
    std::vector<DeviceBuffer> buffers;
    for (std::size_t i = 0; i < kBuffers; ++i)
      buffers.push_back(ledger.allocate(kBytes, i % 2 ? MemoryCategory::weights : MemoryCategory::workspace));
    const std::size_t grown = cuda::device_memory_in_use() - before;
    CHECK(ledger.live_total() == kBuffers * kBytes);
    CHECK(ledger.peak(MemoryCategory::weights) == kBuffers / 2 * kBytes);
    CHECK(grown >= ledger.live_total());
    CHECK(grown <= kBuffers * (kBytes + 2 * kPage) + kOnce);
  }
  CHECK(ledger.live_total() == 0);
  CHECK(ledger.peak_total() == kBuffers * kBytes);
}
