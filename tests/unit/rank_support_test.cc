// The rank loop's torch-free pieces (worker/support): the test-only fault
// hooks, a value's spread over the ranks, and the loop position the
// progress reporter reads.

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "worker/support/fault_hooks.h"
#include "worker/support/loop_position.h"
#include "worker/support/rank_spread.h"

namespace trainctl::train {
namespace {

TEST(FaultHooksTest, FiresAtItsRankStepAndGenerationOnly) {
  absl::StatusOr<FaultHooks> hooks =
      FaultHooks::Parse("exit:rank=1,step=5;hang:rank=0,step=2,generation=2");
  ASSERT_TRUE(hooks.ok()) << hooks.status();
  EXPECT_TRUE(hooks->Fires("exit", 1, 1, 5));
  EXPECT_FALSE(hooks->Fires("exit", 1, 1, 4));
  EXPECT_FALSE(hooks->Fires("exit", 0, 1, 5));
  EXPECT_FALSE(hooks->Fires("exit", 1, 2, 5));  // a restarted generation runs clean
  EXPECT_TRUE(hooks->Fires("hang", 0, 2, 2));
  EXPECT_FALSE(hooks->Fires("hang", 0, 1, 2));
}

TEST(FaultHooksTest, ASlowdownLastsFromItsStepOn) {
  absl::StatusOr<FaultHooks> hooks = FaultHooks::Parse("slow_compute:rank=1,step=3,ms=150");
  ASSERT_TRUE(hooks.ok()) << hooks.status();
  EXPECT_EQ(hooks->DelayMs("slow_compute", 1, 1, 2), 0);
  EXPECT_EQ(hooks->DelayMs("slow_compute", 1, 1, 3), 150);
  EXPECT_EQ(hooks->DelayMs("slow_compute", 1, 1, 900), 150);
  EXPECT_EQ(hooks->DelayMs("slow_compute", 0, 1, 900), 0);
}

TEST(FaultHooksTest, AJobsEntriesStayWithThatJob) {
  absl::StatusOr<FaultHooks> hooks =
      FaultHooks::Parse("exit:rank=0,step=1,job=3;exit:rank=0,step=2");
  ASSERT_TRUE(hooks.ok()) << hooks.status();
  const FaultHooks three = hooks->ForJob("job-3");
  EXPECT_TRUE(three.Fires("exit", 0, 1, 1));
  EXPECT_TRUE(three.Fires("exit", 0, 1, 2));
  const FaultHooks thirty = hooks->ForJob("job-30");
  EXPECT_FALSE(thirty.Fires("exit", 0, 1, 1));
  EXPECT_TRUE(thirty.Fires("exit", 0, 1, 2));  // no job=: every job's
}

TEST(FaultHooksTest, AnEntryThatDoesNotParseIsNamed) {
  const std::map<std::string, std::string> bad = {
      {"explode:rank=0,step=1", "unknown kind 'explode'"},
      {"exit:rank=0", "'exit:rank=0' needs step=N"},
      {"exit:rank=one,step=1", "'rank=one' is not key=number"},
      {"exit:step=1,colour=2", "unknown key 'colour'"},
  };
  for (const auto& [text, why] : bad) {
    absl::StatusOr<FaultHooks> hooks = FaultHooks::Parse(text);
    ASSERT_FALSE(hooks.ok()) << text;
    EXPECT_EQ(hooks.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(hooks.status().message().find(why), std::string::npos)
        << text << ": " << hooks.status().message();
  }
  EXPECT_TRUE(FaultHooks::Parse("").ok());
}

TEST(RankSpreadTest, MinMeanMaxAndTheFirstRankHoldingTheMax) {
  const std::vector<std::vector<double>> rows = {{1, 7}, {3, 9}, {2, 9}};
  const Spread first = SpreadOf(rows, 0);
  EXPECT_DOUBLE_EQ(first.min, 1);
  EXPECT_DOUBLE_EQ(first.mean, 2);
  EXPECT_DOUBLE_EQ(first.max, 3);
  EXPECT_EQ(first.max_rank, 1);
  EXPECT_EQ(SpreadOf(rows, 1).max_rank, 1);  // ties: the lowest rank
  std::map<std::string, double> values;
  AddSpread("step_ms", first, &values);
  EXPECT_EQ(values, (std::map<std::string, double>{
                        {"step_ms", 2}, {"step_ms_min", 1}, {"step_ms_max", 3}}));
}

TEST(RankSpreadTest, MissingAndNanValuesAreLeftOut) {
  const double nan = std::nan("");
  const Spread some = SpreadOf({{nan}, {4}, {}}, 0);
  EXPECT_DOUBLE_EQ(some.mean, 4);
  EXPECT_EQ(some.max_rank, 1);
  const Spread none = SpreadOf({{nan}, {}}, 0);
  EXPECT_TRUE(std::isnan(none.mean));
  EXPECT_TRUE(std::isnan(none.min));
  EXPECT_EQ(none.max_rank, -1);
}

TEST(LoopPositionTest, EachAllReduceCountsOneCollective) {
  LoopPosition position;
  position.BeginStep(7);
  LoopPosition::Snapshot now = position.Read();
  EXPECT_EQ(now.step, 7);
  EXPECT_EQ(now.phase, RankPhase::kCompute);
  position.Enter(RankPhase::kAllReduce);
  position.Enter(RankPhase::kOptimizer);
  position.Enter(RankPhase::kAllReduce);
  now = position.Read();
  EXPECT_EQ(now.collectives, 2);
  EXPECT_STREQ(RankPhaseName(now.phase), "all-reduce");
}

}  // namespace
}  // namespace trainctl::train
