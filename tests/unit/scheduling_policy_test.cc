// The scheduling policy's rules as tables: priorities, fair share, quotas,
// borrowing and reclaim, backfill, never-fits and preemption. Each case is
// one pass of the pure function over a small cluster.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "coordinator/scheduler.h"
#include "tests/unit/scheduling_test_jobs.h"

namespace trainctl::coordinator {
namespace {

RunningJob Running(const std::string& id, int slots, int priority = 0,
                   const std::string& user = "", int64_t eta = -1) {
  RunningJob job;
  job.id = id;
  job.slots = slots;
  job.priority = priority;
  job.user = user;
  job.eta_unix_ms = eta;
  job.grace_ms = 30'000;
  return job;
}

// `free` of `total` slots on one worker.
SchedulingInput Cluster(int free, int total) {
  SchedulingInput in;
  in.workers = {{"w1", free, total}};
  in.now_unix_ms = 1'000'000;
  return in;
}

std::vector<std::string> Started(const ScheduleResult& r) {
  std::vector<std::string> ids;
  for (const Placement& p : r.placements) ids.push_back(p.job_id);
  return ids;
}

std::vector<std::string> Victims(const ScheduleResult& r) {
  std::vector<std::string> ids;
  for (const Preemption& p : r.preemptions) ids.push_back(p.victim);
  return ids;
}

using Ids = std::vector<std::string>;

TEST(SchedulingPolicyTest, HigherPriorityStartsFirstWhateverTheSubmissionOrder) {
  SchedulingInput in = Cluster(2, 2);
  in.pending = {Job("low", 2, 0), Job("high", 2, 100)};
  const ScheduleResult r = Schedule(in);
  EXPECT_EQ(Started(r), Ids{"high"});
  EXPECT_EQ(r.order, (Ids{"high", "low"}));
  EXPECT_EQ(r.waiting.at("low"), "needs 2 slots; 0 of 2 registered slots free");
}

TEST(SchedulingPolicyTest, WithinAPriorityTheUserWithLessRecentUsageGoesFirst) {
  SchedulingInput in = Cluster(1, 4);
  in.pending = {Job("alice-1", 1, 0, "alice"), Job("bob-1", 1, 0, "bob"),
                Job("carol-1", 1, 0, "carol")};
  in.usage = {{"alice", 12.5}, {"bob", 0.5}};  // carol: none yet
  const ScheduleResult r = Schedule(in);
  EXPECT_EQ(r.order, (Ids{"carol-1", "bob-1", "alice-1"}));
  EXPECT_EQ(Started(r), Ids{"carol-1"});
}

TEST(SchedulingPolicyTest, EqualUsageKeepsSubmissionOrderAndResumingJobsLead) {
  SchedulingInput in = Cluster(4, 4);
  PendingJob resumed = Job("resumed", 1, 0, "bob");
  resumed.resuming = true;
  in.pending = {Job("a", 1, 0, "alice"), Job("b", 1, 0, "alice"), resumed};
  EXPECT_EQ(Schedule(in).order, (Ids{"resumed", "a", "b"}));
  // Priority still comes before resuming.
  in.pending.push_back(Job("urgent", 1, 10, "carol"));
  EXPECT_EQ(Schedule(in).order, (Ids{"urgent", "resumed", "a", "b"}));
}

TEST(SchedulingPolicyTest, AUserOverQuotaWaitsWhileAnotherUsersJobStarts) {
  SchedulingInput in = Cluster(4, 8);
  in.running = {Running("alice-0", 4, 0, "alice")};
  in.user_quotas = {{"alice", {4, -1, false}}};
  in.pending = {Job("alice-1", 2, 0, "alice"), Job("bob-1", 2, 0, "bob")};
  const ScheduleResult r = Schedule(in);
  EXPECT_EQ(Started(r), Ids{"bob-1"});
  EXPECT_EQ(r.waiting.at("alice-1"),
            "over quota: user alice's jobs use 4 of 4 slots and it needs 2");
}

TEST(SchedulingPolicyTest, TheDefaultQuotaAppliesToUsersWithoutTheirOwn) {
  SchedulingInput in = Cluster(8, 8);
  in.user_quotas = {{"*", {2, -1, false}}, {"alice", {8, -1, false}}};
  in.pending = {Job("alice-1", 4, 0, "alice"), Job("bob-1", 4, 0, "bob")};
  const ScheduleResult r = Schedule(in);
  EXPECT_EQ(Started(r), Ids{"alice-1"});
  EXPECT_EQ(r.waiting.at("bob-1"),
            "can never start: it needs 4 slots and user bob's quota is 2");
}

TEST(SchedulingPolicyTest, GroupQuotasCountEveryMembersJobs) {
  SchedulingInput in = Cluster(6, 8);
  in.group_of_user = {{"alice", "vision"}, {"bob", "vision"}, {"carol", "nlp"}};
  in.group_quotas = {{"vision", {4, -1, false}}};
  in.running = {Running("alice-0", 2, 0, "alice")};
  in.pending = {Job("bob-1", 4, 0, "bob"), Job("carol-1", 4, 0, "carol")};
  const ScheduleResult r = Schedule(in);
  EXPECT_EQ(Started(r), Ids{"carol-1"});
  EXPECT_EQ(r.waiting.at("bob-1"),
            "over quota: group vision's jobs use 2 of 4 slots and it needs 4");
}

TEST(SchedulingPolicyTest, GpuQuotasCountOnlyGpuSlots) {
  SchedulingInput in;
  in.workers = {{"g", 4, 4, 4, 4}};
  in.user_quotas = {{"alice", {-1, 1, false}}};
  PendingJob gpu = Job("gpu", 2, 0, "alice");
  gpu.device = "cuda";
  in.pending = {gpu, Job("cpu", 2, 0, "alice")};
  const ScheduleResult r = Schedule(in);
  EXPECT_EQ(Started(r), Ids{"cpu"});
  EXPECT_EQ(r.waiting.at("gpu"),
            "can never start: it needs 2 GPU slots and user alice's quota is 1");
}

TEST(SchedulingPolicyTest, ABorrowingJobStartsOnIdleSlotsAndIsReclaimedFirst) {
  // alice may borrow beyond 2 slots while they are idle.
  SchedulingInput in = Cluster(4, 4);
  in.user_quotas = {{"alice", {2, -1, true}}, {"bob", {4, -1, false}}};
  in.pending = {Job("alice-big", 4, 0, "alice")};
  ScheduleResult r = Schedule(in);
  ASSERT_EQ(Started(r), Ids{"alice-big"});
  EXPECT_TRUE(r.placements[0].borrowing);

  // bob, within his quota and of the same priority, takes them back.
  in = Cluster(0, 4);
  in.user_quotas = {{"alice", {2, -1, true}}, {"bob", {4, -1, false}}};
  RunningJob borrowed = Running("alice-big", 4, 0, "alice");
  borrowed.borrowing = true;
  in.running = {borrowed};
  in.pending = {Job("bob-1", 2, 0, "bob")};
  r = Schedule(in);
  EXPECT_TRUE(r.placements.empty());
  ASSERT_EQ(Victims(r), Ids{"alice-big"});
  EXPECT_EQ(r.preemptions[0].by, "bob-1");
  EXPECT_EQ(r.preemptions[0].reason,
            "preempted by job bob-1: it borrowed slots beyond its quota and "
            "bob-1 is within its own");
  EXPECT_EQ(r.preemptions[0].grace_ms, 30'000);
  EXPECT_EQ(r.waiting.at("bob-1"),
            "preempting job alice-big; starts once they have checkpointed and "
            "stopped");
}

TEST(SchedulingPolicyTest, BorrowersAreFoundFromTheQuotasInTheOrderJobsStarted) {
  // alice's quota is 2: of her two running 2-slot jobs, the later one is
  // beyond it, whatever the caller said, and is the one reclaimed.
  SchedulingInput in = Cluster(0, 4);
  in.user_quotas = {{"alice", {2, -1, true}}};
  RunningJob first = Running("alice-1", 2, 0, "alice");
  first.started_unix_ms = 100;
  RunningJob second = Running("alice-2", 2, 0, "alice");
  second.started_unix_ms = 200;
  in.running = {second, first};
  in.pending = {Job("bob-1", 2, 0, "bob")};
  const ScheduleResult r = Schedule(in);
  EXPECT_EQ(Victims(r), Ids{"alice-2"});
}

TEST(SchedulingPolicyTest, AJobWithinItsQuotaGoesBeforeABorrowerWhateverTheOrder) {
  // The borrower resumes (so it would lead), yet bob's job, within his
  // quota, takes the free slots: borrowed slots are those nobody wants.
  SchedulingInput in = Cluster(2, 2);
  in.user_quotas = {{"alice", {1, -1, true}}, {"bob", {2, -1, false}}};
  PendingJob alices = Job("alice-1", 2, 0, "alice");
  alices.resuming = true;
  in.pending = {alices, Job("bob-1", 2, 0, "bob")};
  const ScheduleResult r = Schedule(in);
  EXPECT_EQ(Started(r), Ids{"bob-1"});
  EXPECT_EQ(r.order, (Ids{"bob-1", "alice-1"}));
  EXPECT_TRUE(r.preemptions.empty());  // she may not preempt to borrow
}

TEST(SchedulingPolicyTest, AJobThatCannotCheckpointIsNeverAVictim) {
  SchedulingInput in = Cluster(0, 4);
  RunningJob fragile = Running("fragile", 4, 0);
  fragile.preemptible = false;
  RunningJob sturdy = Running("sturdy", 2, 5);
  in.running = {fragile, sturdy};
  in.workers = {{"w1", 0, 6}};
  in.pending = {Job("urgent", 2, 100)};
  const ScheduleResult r = Schedule(in);
  EXPECT_EQ(Victims(r), Ids{"sturdy"});  // not the lower, larger one
}

TEST(SchedulingPolicyTest, ABorrowerNeverPreemptsToBorrowMore) {
  SchedulingInput in = Cluster(0, 4);
  in.user_quotas = {{"alice", {1, -1, true}}};
  RunningJob other = Running("bob-1", 4, 0, "bob");
  other.borrowing = true;
  in.running = {other};
  in.pending = {Job("alice-1", 2, 0, "alice")};
  const ScheduleResult r = Schedule(in);
  EXPECT_TRUE(r.preemptions.empty());
  EXPECT_EQ(r.waiting.at("alice-1"), "needs 2 slots; 0 of 4 registered slots free");
}

TEST(SchedulingPolicyTest, ABorrowerOfAHigherClassDoesNotPreemptEither) {
  // Were alice's urgent job to stop bob's, bob's (within his quota, so
  // considered first) would take the slots back, and it would stop it
  // again: a job beyond its quota waits for idle slots.
  SchedulingInput in = Cluster(0, 2);
  in.user_quotas = {{"alice", {1, -1, true}}};
  in.running = {Running("bob-1", 2, 0, "bob")};
  in.pending = {Job("alice-1", 2, 100, "alice")};
  const ScheduleResult r = Schedule(in);
  EXPECT_TRUE(r.preemptions.empty());
  EXPECT_EQ(r.wait_kinds.at("alice-1"), WaitKind::kReserved);
}

TEST(SchedulingPolicyTest, AResumingJobsOwnStoppingRanksDoNotCountAgainstItsQuota) {
  // bob's 2-rank job restarts on the 2 slots its old ranks still hold:
  // with a quota of 2 it is within it, not borrowing or over.
  SchedulingInput in = Cluster(0, 2);
  in.user_quotas = {{"bob", {2, -1, false}}};
  RunningJob old = Running("bob-1", 2, 0, "bob");
  old.stopping = true;
  in.running = {old};
  PendingJob again = Job("bob-1", 2, 0, "bob");
  again.resuming = true;
  again.not_ready = "waiting for 2 ranks of generation 1 to stop";
  in.pending = {again};
  const ScheduleResult r = Schedule(in);
  EXPECT_EQ(r.wait_kinds.at("bob-1"), WaitKind::kNotReady);
  EXPECT_EQ(r.waiting.at("bob-1"), "waiting for 2 ranks of generation 1 to stop");
}

TEST(SchedulingPolicyTest, PreemptsTheFewestLowestJobs) {
  SchedulingInput in = Cluster(0, 8);
  in.running = {Running("mid", 2, 50), Running("low-small", 1, 0),
                Running("low-big", 4, 0), Running("low-other", 1, 0)};
  in.pending = {Job("urgent", 4, 100)};
  const ScheduleResult r = Schedule(in);
  // One job of the lowest priority frees 4: not the three small ones.
  EXPECT_EQ(Victims(r), Ids{"low-big"});
  EXPECT_EQ(r.preemptions[0].reason, "preempted by job urgent (priority 100 > 0)");
  EXPECT_EQ(r.preemptions[0].shrink_to, 0);
}

TEST(SchedulingPolicyTest, PreemptsAcrossPrioritiesOnlyWhenTheLowestAreNotEnough) {
  SchedulingInput in = Cluster(1, 8);
  in.running = {Running("mid", 3, 50), Running("low", 2, 0),
                Running("high", 2, 100)};
  in.pending = {Job("urgent", 5, 100)};
  const ScheduleResult r = Schedule(in);
  // 1 free + low's 2 + mid's 3 >= 5; "high" is of equal priority: never.
  EXPECT_EQ(Victims(r), (Ids{"low", "mid"}));
}

TEST(SchedulingPolicyTest, NothingIsPreemptedWhenEvenAllLowerJobsWouldNotFreeEnough) {
  SchedulingInput in = Cluster(0, 4);
  in.running = {Running("low", 1, 0), Running("peer", 3, 100)};
  in.pending = {Job("urgent", 3, 100)};
  const ScheduleResult r = Schedule(in);
  EXPECT_TRUE(r.preemptions.empty());
  EXPECT_EQ(r.waiting.at("urgent"), "needs 3 slots; 0 of 4 registered slots free");
}

TEST(SchedulingPolicyTest, AnElasticVictimIsShrunkWhenThatFreesEnough) {
  SchedulingInput in = Cluster(0, 8);
  RunningJob elastic = Running("elastic", 8, 0);
  elastic.min_ranks = 2;
  elastic.batch = 48;
  in.running = {elastic};
  in.pending = {Job("urgent", 3, 100)};
  const ScheduleResult r = Schedule(in);
  ASSERT_EQ(Victims(r), Ids{"elastic"});
  // 8 - 3 = 5 does not divide 48; 4 does.
  EXPECT_EQ(r.preemptions[0].shrink_to, 4);
  EXPECT_EQ(r.preemptions[0].reason,
            "preempted by job urgent (priority 100 > 0); it can go on with 4 "
            "of its 8 ranks");
}

TEST(SchedulingPolicyTest, SlotsOfStoppingJobsAreNotPreemptedForTwice) {
  SchedulingInput in = Cluster(0, 4);
  RunningJob stopping = Running("victim", 2, 0);
  stopping.stopping = true;
  in.running = {stopping, Running("other-low", 2, 0)};
  in.pending = {Job("urgent", 2, 100)};
  const ScheduleResult r = Schedule(in);
  EXPECT_TRUE(r.preemptions.empty());
  EXPECT_EQ(r.waiting.at("urgent"),
            "needs 2 slots; 0 of 4 registered slots free; waiting for slots of "
            "stopping jobs");
}

TEST(SchedulingPolicyTest, APreemptorHoldsTheFreeSlotsItWillNeed) {
  SchedulingInput in = Cluster(2, 4);
  in.running = {Running("low", 2, 0)};
  in.pending = {Job("urgent", 4, 100), Job("small", 1, 0)};
  const ScheduleResult r = Schedule(in);
  EXPECT_EQ(Victims(r), Ids{"low"});
  // The two free slots are urgent's: small does not take one.
  EXPECT_TRUE(r.placements.empty());
}

TEST(SchedulingPolicyTest, PreemptionCanBeTurnedOff) {
  SchedulingInput in = Cluster(0, 2);
  in.preemption = false;
  in.running = {Running("low", 2, 0)};
  in.pending = {Job("urgent", 2, 100)};
  EXPECT_TRUE(Schedule(in).preemptions.empty());
}

TEST(SchedulingPolicyTest, BackfillUsesOnlySlotsTheReservedJobWillNotNeed) {
  // 8 slots, 3 free. "a" (4 slots) ends at t=2000, "b" (1) at t=9000.
  // big needs 6: at t=2000 there are 3 + 4 = 7 free, one more than it needs.
  SchedulingInput in = Cluster(3, 8);
  in.running = {Running("a", 4, 0, "", 2000), Running("b", 1, 0, "", 9000)};
  in.pending = {Job("big", 6), Job("two", 2), Job("one", 1), Job("one-more", 1)};
  const ScheduleResult r = Schedule(in);
  EXPECT_EQ(Started(r), Ids{"one"});
  EXPECT_TRUE(r.placements[0].backfilled);
  EXPECT_EQ(r.waiting.at("big"), "needs 6 slots; 3 of 8 registered slots free");
  EXPECT_EQ(r.waiting.at("two"),
            "needs 2 slots; 3 of 8 registered slots free; the free ones are "
            "held for job big, ahead in the queue");
  EXPECT_EQ(r.waiting.at("one-more"),
            "needs 1 slots; 2 of 8 registered slots free; the free ones are "
            "held for job big, ahead in the queue");
}

TEST(SchedulingPolicyTest, AJobWithoutAnEtaCountsAsNeverEnding) {
  // Were "a" to end at the end of time, 8 - 7 = 1 slot would be spare and
  // granted again on every pass: no backfill on its account.
  SchedulingInput in = Cluster(3, 8);
  in.running = {Running("a", 5, 0)};
  in.pending = {Job("big", 7), Job("one", 1)};
  EXPECT_TRUE(Schedule(in).placements.empty());
  // Once its ETA is known, the spare slot is there.
  in.running = {Running("a", 5, 0, "", 5000)};
  ScheduleResult r = Schedule(in);
  EXPECT_EQ(Started(r), Ids{"one"});
  // And backfill can be turned off.
  in.backfill = false;
  EXPECT_TRUE(Schedule(in).placements.empty());
}

TEST(SchedulingPolicyTest, NeverFittingJobsAreHeldWithTheReasonAndBlockNoOne) {
  SchedulingInput in = Cluster(2, 4);
  in.user_quotas = {{"alice", {2, -1, false}}};
  in.pending = {Job("huge", 5), Job("alice-3", 3, 0, "alice"), Job("small", 2)};
  const ScheduleResult r = Schedule(in);
  EXPECT_EQ(Started(r), Ids{"small"});
  EXPECT_FALSE(r.placements[0].backfilled);
  EXPECT_EQ(r.waiting.at("huge"),
            "needs 5 slots and the cluster has 4 in all; it waits for more workers and holds up no other job");
  EXPECT_EQ(r.waiting.at("alice-3"),
            "can never start: it needs 3 slots and user alice's quota is 2");
}

TEST(SchedulingPolicyTest, ManyWorkersPackAsBefore) {
  SchedulingInput in;
  for (int i = 0; i < 5; ++i) {
    in.workers.push_back({"w" + std::to_string(i), i + 1, 8});
  }
  in.pending = {Job("a", 7), Job("b", 3)};
  const ScheduleResult r = Schedule(in);
  ASSERT_EQ(r.placements.size(), 2u);
  EXPECT_EQ(r.placements[0].rank_workers,
            (Ids{"w4", "w4", "w4", "w4", "w4", "w3", "w3"}));
  // w3 has 2 left, w2 has 3: b goes to w2.
  EXPECT_EQ(r.placements[1].rank_workers, (Ids{"w2", "w2", "w2"}));
}

}  // namespace
}  // namespace trainctl::coordinator
