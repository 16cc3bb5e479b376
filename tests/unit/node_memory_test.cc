// What a worker registers of its memory for the dry run's memory plan.

#include "worker/agent/node_memory.h"

#include <gtest/gtest.h>

namespace trainctl::agent {
namespace {

constexpr char kMeminfo[] =
    "MemTotal:       16318548 kB\nMemFree:         1234567 kB\nMemAvailable:    9876543 kB\n";

TEST(NodeMemoryTest, MemTotalOrTheCgroupLimitWhicheverIsLower) {
  EXPECT_EQ(MemoryBytesFrom(kMeminfo, ""), int64_t{16318548} * 1024);
  EXPECT_EQ(MemoryBytesFrom(kMeminfo, "max\n"), int64_t{16318548} * 1024);
  EXPECT_EQ(MemoryBytesFrom(kMeminfo, "4294967296\n"), int64_t{4294967296});
  EXPECT_EQ(MemoryBytesFrom(kMeminfo, "99999999999999\n"), int64_t{16318548} * 1024);
  EXPECT_EQ(MemoryBytesFrom("", "2147483648"), int64_t{2147483648});
  EXPECT_EQ(MemoryBytesFrom("garbage", "garbage"), 0);
}

TEST(NodeMemoryTest, TheSmallestOfTheSlotsGpus) {
  const std::string csv =
      "0, GPU-aaaa, 81559\n1, GPU-bbbb, 40960\n2, GPU-cccc, 143771\nnot a line\n";
  EXPECT_EQ(GpuMemoryBytesFrom(csv, {"0", "2"}), int64_t{81559} << 20);
  EXPECT_EQ(GpuMemoryBytesFrom(csv, {"GPU-bbbb", "2"}), int64_t{40960} << 20);
  EXPECT_EQ(GpuMemoryBytesFrom(csv, {"7"}), 0);
  EXPECT_EQ(GpuMemoryBytesFrom("", {"0"}), 0);
}

}  // namespace
}  // namespace trainctl::agent
