#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace trainctl::train {

// Makes glibc malloc keep freed blocks of up to 32 MiB for reuse instead of
// returning them to the kernel.
//
// LibTorch's CPU allocator is plain malloc, and a training step frees and
// reallocates the same activation and gradient buffers every step. With
// glibc's defaults, buffers of a few MiB are mmap()ed and munmap()ed (or the
// heap top is trimmed) each time, so every step first-touches them again:
// page faults and kernel zeroing that made the cnn at batch 128 about 3x
// slower than its kernels (see docs/performance.md). The cost is that a
// rank keeps its peak heap until it exits, as GPU caching allocators do.
//
// Call once at process start, before large allocations. A setting that
// GLIBC_TUNABLES gives is left as it is. Returns false if the C library
// refused a setting (not glibc, or limits changed).
bool KeepFreedHeapForReuse();

// GLIBC_TUNABLES for a rank process: the settings above, applied from exec
// on, plus transparent huge pages for malloc'd memory (glibc.malloc.hugetlb,
// glibc >= 2.35). With THP in "madvise" mode, as on many VMs, every 4 KiB
// first touch is a page fault; measured on the 2-core build VM, 256 MiB of
// fresh heap took 1.2 s to touch in 4 KiB pages and 36 ms in 2 MiB ones.
// `inherited` (the caller's own GLIBC_TUNABLES) goes last, so it wins.
std::string RankMallocTunables(const std::string& inherited);

// Touches `bytes` of heap in blocks the heap keeps, then frees them, so that
// the first training step finds its memory already mapped. For a standby
// rank, while it waits; call after KeepFreedHeapForReuse(). Stops early,
// between blocks, once `stop` (if given) returns true: an assignment that
// arrives must not wait for this.
void PrefaultHeap(int64_t bytes, const std::function<bool()>& stop = {});

}  // namespace trainctl::train
