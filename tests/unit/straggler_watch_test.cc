// Which rank is a straggler, window by window: a rank well above its peers'
// median in data or compute time for long enough is reported once, and
// once more when it is back; noise, short bursts and a lone rank are not.

#include "worker/support/straggler_watch.h"

#include <gtest/gtest.h>

#include <vector>

namespace trainctl::train {
namespace {

using Phase = StragglerWatch::Phase;
using Times = StragglerWatch::RankTimes;

StragglerWatch Watch(int64_t min_steps = 50) {
  StragglerWatch::Options options;
  options.min_steps = min_steps;
  return StragglerWatch(options);
}

// Four ranks computing 10 ms a step, rank `slow` `factor` times that.
std::vector<Times> Ranks(int slow, double factor, double data_ms = 2) {
  std::vector<Times> ranks(4, Times{data_ms, 10});
  if (slow >= 0) ranks[slow].compute_ms = 10 * factor;
  return ranks;
}

TEST(StragglerWatchTest, ASlowRankIsReportedOnceAfterEnoughStepsThenItsRecovery) {
  StragglerWatch watch = Watch(50);
  // 20 steps a window: 40 steps slow is not enough, 60 is.
  EXPECT_TRUE(watch.Observe(Ranks(2, 1.8), 20).empty());
  EXPECT_TRUE(watch.Observe(Ranks(2, 1.8), 20).empty());
  std::vector<StragglerWatch::Report> found = watch.Observe(Ranks(2, 1.8), 20);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].rank, 2);
  EXPECT_EQ(found[0].phase, Phase::kCompute);
  EXPECT_DOUBLE_EQ(found[0].ratio, 1.8);
  EXPECT_EQ(found[0].steps, 60);
  EXPECT_FALSE(found[0].recovered);
  EXPECT_TRUE(watch.Observe(Ranks(2, 1.9), 20).empty());  // said once
  std::vector<StragglerWatch::Report> back = watch.Observe(Ranks(-1, 1), 20);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0].rank, 2);
  EXPECT_TRUE(back[0].recovered);
}

TEST(StragglerWatchTest, AShortBurstStartsTheCountAgain) {
  StragglerWatch watch = Watch(50);
  EXPECT_TRUE(watch.Observe(Ranks(1, 2), 40).empty());
  EXPECT_TRUE(watch.Observe(Ranks(-1, 1), 40).empty());  // a normal window
  EXPECT_TRUE(watch.Observe(Ranks(1, 2), 40).empty());   // 40 again, not 80
  EXPECT_EQ(watch.Observe(Ranks(1, 2), 40).size(), 1u);
}

TEST(StragglerWatchTest, BelowTheRatioOrTheFloorIsNotSlow) {
  StragglerWatch watch = Watch(10);
  EXPECT_TRUE(watch.Observe(Ranks(0, 1.4), 100).empty());
  // 3x, but of steps so short that the difference is noise.
  std::vector<Times> tiny(3, Times{0.1, 0.2});
  tiny[1].compute_ms = 0.6;
  EXPECT_TRUE(watch.Observe(tiny, 100).empty());
}

TEST(StragglerWatchTest, ASlowDataLoaderIsItsOwnPhase) {
  StragglerWatch watch = Watch(10);
  std::vector<Times> ranks = Ranks(-1, 1, 2);
  ranks[3].data_ms = 9;
  std::vector<StragglerWatch::Report> found = watch.Observe(ranks, 10);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].rank, 3);
  EXPECT_EQ(found[0].phase, Phase::kData);
  EXPECT_STREQ(PhaseName(found[0].phase), "data");
}

TEST(StragglerWatchTest, TwoRanksCompareWithEachOtherAndOneRankWithNoOne) {
  StragglerWatch two = Watch(10);
  std::vector<StragglerWatch::Report> found =
      two.Observe({Times{1, 10}, Times{1, 25}}, 10);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].rank, 1);  // not rank 0, whose peer is slower
  StragglerWatch one = Watch(1);
  EXPECT_TRUE(one.Observe({Times{1, 99}}, 100).empty());
}

TEST(StragglerWatchTest, TheMedianIgnoresOneOtherSlowRank) {
  // Ranks 1 and 3 are both slow: each is compared with the median of the
  // others, which the fast majority sets.
  StragglerWatch watch = Watch(10);
  std::vector<Times> ranks(5, Times{1, 10});
  ranks[1].compute_ms = 30;
  ranks[3].compute_ms = 30;
  std::vector<StragglerWatch::Report> found = watch.Observe(ranks, 10);
  ASSERT_EQ(found.size(), 2u);
  EXPECT_EQ(found[0].rank, 1);
  EXPECT_EQ(found[1].rank, 3);
}

}  // namespace
}  // namespace trainctl::train
