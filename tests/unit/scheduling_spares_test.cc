// fault_tolerance.spares in the scheduling pass, as tables: which free
// slots a running job holds for its replacement ranks, who may still take
// them, and what quotas and preemption do to them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "coordinator/scheduler.h"
#include "tests/unit/scheduling_test_jobs.h"

namespace trainctl::coordinator {
namespace {

using Ids = std::vector<std::string>;

RunningJob Holder(const std::string& id, int slots, int spares, Ids rank_workers,
                  int priority = 0, const std::string& user = "") {
  RunningJob job;
  job.id = id;
  job.slots = slots;
  job.spares = spares;
  job.rank_workers = std::move(rank_workers);
  job.priority = priority;
  job.user = user;
  job.started_unix_ms = 1;
  return job;
}

// w1 runs the holder's 2 ranks (no slot left); w2, w3 and w4 have `free`
// free slots each.
SchedulingInput Cluster(int free) {
  SchedulingInput in;
  in.workers = {{"w1", 0, 2}, {"w2", free, 2}, {"w3", free, 2}, {"w4", free, 2}};
  in.now_unix_ms = 1'000'000;
  return in;
}

Ids Started(const ScheduleResult& r) {
  Ids ids;
  for (const Placement& p : r.placements) ids.push_back(p.job_id);
  return ids;
}

TEST(SchedulingSparesTest, AHolderTakesItsSparesOnePerWorkerAwayFromItsRanks) {
  SchedulingInput in = Cluster(2);
  in.workers[0].free_slots = 1;  // w1, where its ranks run, has room too
  in.running = {Holder("a", 2, 3, {"w1", "w1"})};
  const ScheduleResult r = Schedule(in);
  EXPECT_EQ(r.spares.at("a"), (Ids{"w2", "w3", "w4"}));
}

TEST(SchedulingSparesTest, WithTooFewOtherWorkersItDoublesUpBeforeUsingItsOwn) {
  SchedulingInput in;
  in.workers = {{"w1", 1, 3}, {"w2", 2, 2}};
  in.running = {Holder("a", 2, 3, {"w1", "w1"})};
  const ScheduleResult r = Schedule(in);
  EXPECT_EQ(r.spares.at("a"), (Ids{"w2", "w2", "w1"}));
}

TEST(SchedulingSparesTest, NoPendingJobOfItsPriorityOrLowerTakesThem) {
  SchedulingInput in = Cluster(1);  // 3 free slots
  in.running = {Holder("a", 2, 2, {"w1", "w1"}, /*priority=*/50)};
  in.pending = {Job("same", 2, 50)};
  ScheduleResult r = Schedule(in);
  EXPECT_EQ(r.spares.at("a").size(), 2u);
  EXPECT_TRUE(Started(r).empty());
  EXPECT_NE(r.waiting.at("same").find("1 of 8 registered slots free"), std::string::npos)
      << r.waiting.at("same");
  // The slot beyond the spares is anyone's.
  in.pending = {Job("lower", 1, 0)};
  r = Schedule(in);
  EXPECT_EQ(Started(r), Ids{"lower"});
  EXPECT_EQ(r.spares.at("a").size(), 2u);
}

TEST(SchedulingSparesTest, APendingJobOfAHigherPriorityComesFirst) {
  SchedulingInput in = Cluster(1);
  in.running = {Holder("a", 2, 2, {"w1", "w1"}, /*priority=*/0)};
  in.pending = {Job("urgent", 2, 100)};
  const ScheduleResult r = Schedule(in);
  EXPECT_EQ(Started(r), Ids{"urgent"});
  EXPECT_EQ(r.spares.at("a").size(), 1u);  // what it left
}

TEST(SchedulingSparesTest, SparesStayWithinTheOwnersQuotaAndCountTowardsIt) {
  SchedulingInput in = Cluster(2);
  in.user_quotas["ann"] = Quota{3, -1, /*borrow=*/true};
  in.running = {Holder("a", 2, 4, {"w1", "w1"}, 0, "ann")};
  in.pending = {Job("ann-2", 1, 0, "ann")};
  const ScheduleResult r = Schedule(in);
  // 2 ranks + 1 spare reach the quota of 3: no borrowing for spares, and
  // her next job borrows beyond them (started in the second round).
  EXPECT_EQ(r.spares.at("a").size(), 1u);
  ASSERT_EQ(Started(r), Ids{"ann-2"});
  EXPECT_TRUE(r.placements[0].borrowing);
}

TEST(SchedulingSparesTest, HigherPriorityHoldersChooseFirst) {
  SchedulingInput in = Cluster(1);  // 3 free slots
  in.running = {Holder("low", 2, 2, {"w1", "w1"}, 0),
                Holder("high", 2, 2, {"w1", "w1"}, 10)};
  const ScheduleResult r = Schedule(in);
  EXPECT_EQ(r.spares.at("high").size(), 2u);
  EXPECT_EQ(r.spares.at("low").size(), 1u);
}

TEST(SchedulingSparesTest, AJobStartedByThePassHoldsItsSparesAheadOfJobsBehindIt) {
  SchedulingInput in;
  in.workers = {{"w1", 2, 2}, {"w2", 1, 1}, {"w3", 1, 1}};
  PendingJob first = Job("first", 2);
  first.spares = 1;
  in.pending = {first, Job("second", 2)};
  const ScheduleResult r = Schedule(in);
  ASSERT_EQ(Started(r), Ids{"first"});
  EXPECT_EQ(r.placements[0].rank_workers, (Ids{"w1", "w1"}));
  EXPECT_EQ(r.spares.at("first"), Ids{"w2"});
  EXPECT_TRUE(r.waiting.count("second"));  // one slot left, it needs 2
}

TEST(SchedulingSparesTest, AJobBeingPreemptedOrStoppingHoldsNone) {
  SchedulingInput in = Cluster(1);
  RunningJob stopping = Holder("stopping", 2, 2, {"w1", "w1"});
  stopping.stopping = true;
  in.running = {stopping};
  EXPECT_EQ(Schedule(in).spares.count("stopping"), 0u);

  SchedulingInput full;
  full.workers = {{"w1", 0, 2}, {"w2", 1, 1}};
  full.running = {Holder("victim", 2, 1, {"w1", "w1"}, 0)};
  full.pending = {Job("urgent", 3, 100)};
  const ScheduleResult r = Schedule(full);
  ASSERT_EQ(r.preemptions.size(), 1u);
  EXPECT_EQ(r.preemptions[0].victim, "victim");
  EXPECT_EQ(r.spares.count("victim"), 0u);
}

}  // namespace
}  // namespace trainctl::coordinator
