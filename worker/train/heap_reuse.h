#pragma once

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
// Call once at process start, before large allocations. Returns false if
// the C library refused a setting (not glibc, or limits changed).
bool KeepFreedHeapForReuse();

}  // namespace trainctl::train
