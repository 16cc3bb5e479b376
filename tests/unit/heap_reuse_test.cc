#include "worker/support/heap_reuse.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace trainctl::train {
namespace {

constexpr size_t kBlock = 16 << 20;  // an activation-sized buffer

// AddressSanitizer replaces malloc (mallopt does nothing there), so glibc's
// heap cannot be observed in the `sanitize` build.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool kGlibcMalloc = false;
#else
constexpr bool kGlibcMalloc = true;
#endif
#define SKIP_WITHOUT_GLIBC_MALLOC() \
  if (!kGlibcMalloc) GTEST_SKIP() << "malloc is AddressSanitizer's here"

// What glibc's defaults do with a buffer this size, and what the rank's
// settings change: it comes from the heap, and freeing it keeps the memory.
TEST(HeapReuseTest, MidSizedBlocksComeFromTheHeapAndStayAfterFree) {
  SKIP_WITHOUT_GLIBC_MALLOC();
  ASSERT_TRUE(KeepFreedHeapForReuse());
  const size_t mapped_before = mallinfo2().hblkhd;
  char* block = static_cast<char*>(malloc(kBlock));
  ASSERT_NE(block, nullptr);
  memset(block, 1, kBlock);  // touch it, as a tensor would
  EXPECT_LT(mallinfo2().hblkhd, mapped_before + kBlock)
      << "a 16 MiB block was mmap()ed; it would be unmapped on free";
  free(block);
  EXPECT_GE(mallinfo2().fordblks, kBlock)
      << "the freed block was returned to the kernel (heap trimmed)";
  // The next step's buffer of the same size reuses it.
  const size_t arena_before = mallinfo2().arena;
  char* again = static_cast<char*>(malloc(kBlock));
  ASSERT_NE(again, nullptr);
  EXPECT_EQ(mallinfo2().arena, arena_before) << "the heap had to grow again";
  free(again);
}

TEST(HeapReuseTest, BlocksOverTheLimitAreStillMapped) {
  SKIP_WITHOUT_GLIBC_MALLOC();
  ASSERT_TRUE(KeepFreedHeapForReuse());
  const size_t mapped_before = mallinfo2().hblkhd;
  void* huge = malloc(64 << 20);
  ASSERT_NE(huge, nullptr);
  EXPECT_GE(mallinfo2().hblkhd, mapped_before + (64 << 20));
  free(huge);
}

TEST(HeapReuseTest, PrefaultedHeapStaysMappedForTheFirstStep) {
  SKIP_WITHOUT_GLIBC_MALLOC();
  ASSERT_TRUE(KeepFreedHeapForReuse());
  PrefaultHeap(int64_t{64} << 20);
  // Freed but kept: the heap holds at least that much free memory, and a
  // step-sized allocation needs no new heap.
  EXPECT_GE(mallinfo2().fordblks, size_t{64} << 20);
  const size_t arena_before = mallinfo2().arena;
  std::vector<void*> step;
  for (int i = 0; i < 3; ++i) step.push_back(malloc(kBlock));
  EXPECT_EQ(mallinfo2().arena, arena_before);
  for (void* p : step) free(p);
}

TEST(HeapReuseTest, PrefaultStopsWhenAskedTo) {
  int blocks = 0;
  PrefaultHeap(int64_t{1} << 30, [&] { return ++blocks > 2; });
  EXPECT_EQ(blocks, 3);  // two blocks touched, then asked and stopped
}

TEST(HeapReuseTest, TunablesForRanksLetTheWorkersOwnSettingsWin) {
  const std::string ours = RankMallocTunables("");
  EXPECT_NE(ours.find("glibc.malloc.hugetlb=1"), std::string::npos) << ours;
  EXPECT_NE(ours.find("glibc.malloc.mmap_threshold=33554432"), std::string::npos);
  EXPECT_NE(ours.find("glibc.malloc.trim_threshold=1073741824"), std::string::npos);
  const std::string merged = RankMallocTunables("glibc.malloc.hugetlb=0");
  EXPECT_EQ(merged, ours + ":glibc.malloc.hugetlb=0");  // later entries win
}

}  // namespace
}  // namespace trainctl::train
