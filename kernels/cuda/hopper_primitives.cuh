#pragma once
// The sm_90a building blocks the WGMMA kernels are made of, each a thin wrapper over one PTX
// instruction (PTX ISA 8.x): mbarriers (the producer/consumer handshake), TMA tile loads
// into shared memory and stores out of it, proxy fences and named barriers for those stores,
// warpgroup fences for wgmma, register reallocation, and the shared-memory
// matrix descriptor wgmma reads its operands through.
#include <cuda.h>

#include <cstdint>

namespace fp8lab::cuda::hopper {

__device__ __forceinline__ std::uint32_t shared_address(const void* pointer) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(pointer));
}

// ---- mbarrier ------------------------------------------------------------------------------
__device__ __forceinline__ void barrier_init(std::uint64_t* barrier, unsigned arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(shared_address(barrier)), "r"(arrivals) : "memory");
}

// Makes the initialised barriers visible to the async (TMA) proxy.
__device__ __forceinline__ void fence_barrier_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }

__device__ __forceinline__ void barrier_wait(std::uint64_t* barrier, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(shared_address(barrier)), "r"(parity)
        : "memory");
  } while (!done);
}

__device__ __forceinline__ void barrier_arrive(std::uint64_t* barrier) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(shared_address(barrier)) : "memory");
}

// One arrival that also tells the barrier how many bytes the TMA loads will deliver.
__device__ __forceinline__ void barrier_arrive_expect_bytes(std::uint64_t* barrier, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(shared_address(barrier)), "r"(bytes)
               : "memory");
}

// ---- TMA -----------------------------------------------------------------------------------
// Loads the box at (inner, outer) of a 2-D tensor map into shared memory; completion is
// counted in bytes on `barrier`. Elements outside the tensor arrive as zeros.
__device__ __forceinline__ void tma_load_2d(void* destination, const CUtensorMap* map, int inner, int outer,
                                            std::uint64_t* barrier) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          shared_address(destination)),
      "l"(reinterpret_cast<std::uint64_t>(map)), "r"(inner), "r"(outer), "r"(shared_address(barrier))
      : "memory");
}

// Stores a shared-memory box to the 2-D tensor at (inner, outer) (bulk async-group completion);
// elements outside the tensor are not written (M and N tails).
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* source, int inner, int outer) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                   reinterpret_cast<std::uint64_t>(map)),
               "r"(shared_address(source)), "r"(inner), "r"(outer)
               : "memory");
}
__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Waits until the committed stores of this thread have read their shared memory (it may be
// written again); bulk_wait_all until they have completed.
__device__ __forceinline__ void bulk_wait_read_all() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_all() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
// Orders this thread's ordinary shared-memory writes before later async-proxy (TMA) reads.
__device__ __forceinline__ void fence_proxy_async_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// A barrier over `threads` threads (a multiple of 32) under hardware barrier `id` (1..15; 0 is __syncthreads).
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<std::uint64_t>(map)) : "memory");
}

// ---- wgmma ordering ------------------------------------------------------------------------
// Before the first wgmma that reads accumulator registers other instructions have written.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// Waits until every committed wgmma group of this warpgroup has completed.
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }
// Keeps the compiler from moving accumulator reads/writes across the asynchronous wgmma.
template <int kCount>
__device__ __forceinline__ void fence_registers(float (&d)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// ---- register reallocation between warpgroups -----------------------------------------------
template <int kRegisters>
__device__ __forceinline__ void release_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegisters));
}
template <int kRegisters>
__device__ __forceinline__ void claim_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegisters));
}

// ---- wgmma shared-memory matrix descriptor ---------------------------------------------------
// For a K-major tile of 128-byte rows written by TMA with 128-byte swizzle: start address
// (bits 0-13, in 16-byte units), leading byte offset unused for this layout (1 by
// convention), stride byte offset 1024 bytes between 8-row groups (bits 32-45, 16-byte
// units), base offset 0 (tiles are 1024-byte aligned), layout 128B swizzle (bits 62-63 = 1).
// Stepping along K inside the 128-byte row is adding bytes / 16 to the start address.
__device__ __forceinline__ std::uint64_t swizzle128_descriptor(const void* tile) {
  const std::uint64_t address = shared_address(tile);
  return ((address & 0x3FFFF) >> 4) | (std::uint64_t{1} << 16) | (std::uint64_t{1024 >> 4} << 32) |
         (std::uint64_t{1} << 62);
}

}  // namespace fp8lab::cuda::hopper
