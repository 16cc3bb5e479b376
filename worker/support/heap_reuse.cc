#include "worker/support/heap_reuse.h"

#include <cstdlib>  // defines __GLIBC__ on glibc systems
#include <cstring>
#include <vector>

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
  // What GLIBC_TUNABLES sets applied at exec (RankMallocTunables from the
  // agent, then the operator's own); mallopt would override the operator.
  const char* env = getenv("GLIBC_TUNABLES");
  const std::string tunables = env != nullptr ? env : "";
  auto given = [&](const char* key) {
    return tunables.find(key) != std::string::npos;
  };
  // Setting either one also turns off glibc's dynamic mmap threshold.
  const bool mmap_ok = given("glibc.malloc.mmap_threshold=") ||
                       mallopt(M_MMAP_THRESHOLD, kLargestHeapBlock) == 1;
  const bool trim_ok = given("glibc.malloc.trim_threshold=") ||
                       mallopt(M_TRIM_THRESHOLD, kKeptFreeHeap) == 1;
  return mmap_ok && trim_ok;
#else
  return false;
#endif
}

std::string RankMallocTunables(const std::string& inherited) {
  std::string tunables =
      "glibc.malloc.hugetlb=1:glibc.malloc.mmap_threshold=" +
      std::to_string(kLargestHeapBlock) +
      ":glibc.malloc.trim_threshold=" + std::to_string(kKeptFreeHeap);
  if (!inherited.empty()) tunables += ":" + inherited;
  return tunables;
}

void PrefaultHeap(int64_t bytes, const std::function<bool()>& stop) {
  constexpr int64_t kBlock = kLargestHeapBlock / 2;  // below the mmap limit
  std::vector<void*> blocks;
  for (int64_t done = 0; done < bytes; done += kBlock) {
    if (stop && stop()) break;
    void* block = malloc(kBlock);
    if (block == nullptr) break;
    memset(block, 0, kBlock);
    asm volatile("" : : "r"(block) : "memory");  // the stores must happen
    blocks.push_back(block);
  }
  // Freed last-first, they merge into the heap top, which is not trimmed.
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) free(*it);
}

}  // namespace trainctl::train
