#include "kernels/train/heap_retention.hpp"

#include <climits>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace fp8lab::train {

void retain_freed_heap_memory() {
#if defined(__GLIBC__)
  // 32 MiB is the largest mmap threshold glibc accepts on 64-bit targets; setting it also stops
  // the threshold's dynamic adjustment. Blocks above it (a tensor of 8M floats) still get their
  // own mapping: rare, and large enough that the fault cost is small beside their use.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
#endif
}

void release_free_heap_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace fp8lab::train
