#pragma once
// Keeps the heap memory a training step frees for the next step instead of handing it back to
// the operating system. glibc returns the top of the heap once more than its trim threshold is
// free, and serves blocks above its mmap threshold (dynamic, from 128 KiB) with fresh mappings;
// a step allocates and frees the same activation buffers every time, so each step paid again for
// page faults and for the kernel zeroing the pages (7% of a dim256 FP32 step on one thread,
// perf). After this call the freed blocks stay in the heap and are reused. Bits are unaffected;
// the resident set between steps stays at about the last step's peak, which the per-step peak
// (harness/train/resident_set.hpp) already reports. A no-op on C libraries other than glibc.
// Called by a training run as it starts (harness/train/training_run.cpp) and by the step
// benchmark's main; the setting then holds for the rest of the process.
namespace fp8lab::train {

void retain_freed_heap_memory();

// Hands the heap's free memory back to the operating system now (glibc's malloc_trim), so that
// the resident set read next is what is in use: a run's baseline in a sweep of runs.
void release_free_heap_memory();

}  // namespace fp8lab::train
