#include "common/shard_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace trainctl {
namespace {

TEST(ShardPlanTest, PermutationIsAPermutation) {
  std::vector<int64_t> perm = EpochPermutation(7, 0, 1000);
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
}

TEST(ShardPlanTest, PermutationDependsOnlyOnSeedAndEpoch) {
  EXPECT_EQ(EpochPermutation(7, 3, 500), EpochPermutation(7, 3, 500));
  EXPECT_NE(EpochPermutation(7, 3, 500), EpochPermutation(7, 4, 500));
  EXPECT_NE(EpochPermutation(7, 3, 500), EpochPermutation(8, 3, 500));
  // Pinned values: a change here would silently change every job's data order.
  EXPECT_EQ(EpochPermutation(1, 0, 5), (std::vector<int64_t>{3, 0, 1, 4, 2}));
}

TEST(ShardPlanTest, RanksSplitEachGlobalBatchWithoutOverlap) {
  const int64_t n = 103, batch = 12;
  const int world = 3;
  std::vector<int64_t> perm = EpochPermutation(5, 1, n);
  const int64_t steps = StepsPerEpoch(n, batch);
  ASSERT_EQ(steps, 8);
  std::multiset<int64_t> seen;
  for (int64_t s = 0; s < steps; ++s) {
    std::vector<int64_t> joined;
    for (int r = 0; r < world; ++r) {
      std::vector<int64_t> mine = RankBatchIndices(perm, s, batch, r, world);
      ASSERT_EQ(mine.size(), 4u);
      joined.insert(joined.end(), mine.begin(), mine.end());
    }
    // The ranks' slices, concatenated, are the single-rank batch.
    EXPECT_EQ(joined, RankBatchIndices(perm, s, batch, 0, 1));
    seen.insert(joined.begin(), joined.end());
  }
  EXPECT_EQ(seen.size(), 96u);
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 96u);
}

TEST(ShardPlanTest, EvalSlicesCoverEverySampleOnce) {
  for (int world : {1, 2, 3, 7}) {
    int64_t covered = 0, expected_begin = 0;
    for (int r = 0; r < world; ++r) {
      Range range = EvalSlice(100, r, world);
      EXPECT_EQ(range.begin, expected_begin);
      covered += range.end - range.begin;
      expected_begin = range.end;
    }
    EXPECT_EQ(covered, 100);
  }
}

}  // namespace
}  // namespace trainctl
