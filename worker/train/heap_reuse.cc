#include "worker/train/heap_reuse.h"

#include <cstdlib>  // defines __GLIBC__ on glibc systems

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace trainctl::train {
namespace {

// glibc's upper limit for M_MMAP_THRESHOLD (HEAP_MAX_SIZE / 2 on 64-bit):
// blocks up to this size come from the heap, larger ones are still mmap()ed.
constexpr int kLargestHeapBlock = 32 << 20;
// Free memory at the heap top kept rather than trimmed.
constexpr int kKeptFreeHeap = 1 << 30;

}  // namespace

bool KeepFreedHeapForReuse() {
#if defined(__GLIBC__)
  // Setting either one also turns off glibc's dynamic mmap threshold.
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, kLargestHeapBlock) == 1;
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, kKeptFreeHeap) == 1;
  return mmap_ok && trim_ok;
#else
  return false;
#endif
}

}  // namespace trainctl::train
