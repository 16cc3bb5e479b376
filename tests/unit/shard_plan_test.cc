#include "common/shard_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_set>
#include <vector>

namespace trainctl {
namespace {

std::vector<int64_t> WholeOrder(uint64_t seed, int64_t epoch, int64_t n) {
  const EpochOrder order(seed, epoch, n);
  std::vector<int64_t> visited;
  for (int64_t p = 0; p < n; ++p) visited.push_back(order.At(p));
  return visited;
}

TEST(ShardPlanTest, OrderIsABijectionForEverySmallSize) {
  for (int64_t n = 1; n <= 300; ++n) {
    const EpochOrder order(7, 0, n);
    std::vector<bool> seen(n, false);
    for (int64_t p = 0; p < n; ++p) {
      const int64_t sample = order.At(p);
      ASSERT_GE(sample, 0);
      ASSERT_LT(sample, n);
      ASSERT_FALSE(seen[sample]) << "n " << n << " visits " << sample << " twice";
      seen[sample] = true;
      ASSERT_EQ(order.PositionOf(sample), p);
    }
  }
}

TEST(ShardPlanTest, OrderDependsOnlyOnSeedAndEpoch) {
  EXPECT_EQ(WholeOrder(7, 3, 500), WholeOrder(7, 3, 500));
  EXPECT_NE(WholeOrder(7, 3, 500), WholeOrder(7, 4, 500));
  EXPECT_NE(WholeOrder(7, 3, 500), WholeOrder(8, 3, 500));
  // Pinned values: a change here would silently change every job's data
  // order, and a job resumed across the change would not see each sample
  // of its epoch exactly once.
  EXPECT_EQ(WholeOrder(1, 0, 5), (std::vector<int64_t>{0, 1, 4, 3, 2}));
  EXPECT_EQ(EpochOrder(1, 0, 10'000'000'000).At(123'456'789), 2'810'612'850);
}

TEST(ShardPlanTest, EveryPositionIsEquallyLikelyToHoldEverySample) {
  // Over 2,000 seeds, how often each of 8 samples comes first: a fair
  // shuffle gives 250 each; a weak one favours some (Feistel networks with
  // too few rounds do).
  std::vector<int> first(8, 0);
  for (uint64_t seed = 0; seed < 2000; ++seed) ++first[EpochOrder(seed, 0, 8).At(0)];
  for (int count : first) {
    EXPECT_GT(count, 190);
    EXPECT_LT(count, 310);
  }
}

TEST(ShardPlanTest, NeighboursInTheFileAreScatteredOverTheEpoch) {
  const int64_t n = 100'000;
  const EpochOrder order(3, 2, n);
  int64_t close = 0;
  double sum = 0;
  for (int64_t p = 0; p + 1 < n; ++p) {
    const int64_t gap = std::llabs(order.At(p + 1) - order.At(p));
    close += gap < 100;
    sum += static_cast<double>(gap);
  }
  // Uniform pairs: P(gap < 100) ~ 0.2%, mean gap n/3.
  EXPECT_LT(close, 600);
  EXPECT_NEAR(sum / (n - 1), n / 3.0, n / 30.0);
}

TEST(ShardPlanTest, TenBillionSamplesNeedNoTableAndStayABijection) {
  const int64_t n = 10'000'000'000;
  const EpochOrder order(11, 5, n);
  // Positions spread over the whole range, and a dense run at the end.
  std::vector<int64_t> positions;
  for (int64_t i = 0; i < 100'000; ++i) positions.push_back(i * (n / 100'000) + i % 7);
  for (int64_t p = n - 1000; p < n; ++p) positions.push_back(p);
  std::unordered_set<int64_t> samples;
  for (int64_t p : positions) {
    const int64_t sample = order.At(p);
    ASSERT_GE(sample, 0);
    ASSERT_LT(sample, n);
    ASSERT_EQ(order.PositionOf(sample), p);
    samples.insert(sample);
  }
  EXPECT_EQ(samples.size(), positions.size());

  // Per-rank slices of a step are disjoint and, joined, the whole batch.
  const int64_t batch = 48;
  for (int64_t step : {int64_t{0}, int64_t{123'456'789}, n / batch - 1}) {
    std::vector<int64_t> joined;
    for (int rank = 0; rank < 3; ++rank) {
      const std::vector<int64_t> mine = RankBatchIndices(order, step, batch, rank, 3);
      ASSERT_EQ(mine.size(), 16u);
      joined.insert(joined.end(), mine.begin(), mine.end());
    }
    EXPECT_EQ(joined, RankBatchIndices(order, step, batch, 0, 1));
    EXPECT_EQ(std::set<int64_t>(joined.begin(), joined.end()).size(), 48u);
  }
}

TEST(ShardPlanTest, RanksSplitEachGlobalBatchWithoutOverlap) {
  const int64_t n = 103, batch = 12;
  const int world = 3;
  const EpochOrder order(5, 1, n);
  const int64_t steps = StepsPerEpoch(n, batch);
  ASSERT_EQ(steps, 8);
  std::multiset<int64_t> seen;
  for (int64_t s = 0; s < steps; ++s) {
    std::vector<int64_t> joined;
    for (int r = 0; r < world; ++r) {
      std::vector<int64_t> mine = RankBatchIndices(order, s, batch, r, world);
      ASSERT_EQ(mine.size(), 4u);
      joined.insert(joined.end(), mine.begin(), mine.end());
    }
    // The ranks' slices, concatenated, are the single-rank batch.
    EXPECT_EQ(joined, RankBatchIndices(order, s, batch, 0, 1));
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
