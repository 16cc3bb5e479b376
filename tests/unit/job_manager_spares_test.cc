// fault_tolerance.spares through the JobManager, driven with fakes: a
// running job holds free slots for its replacement ranks, shows them, keeps
// other jobs of its priority off them, replaces a lost rank there even
// while a job of a higher priority waits, and holds a new spare when a
// slot comes free.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "tests/unit/job_manager_faults_fixture.h"

namespace trainctl::coordinator {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> Spares(const v1::Job& job) {
  return {job.spare_workers().begin(), job.spare_workers().end()};
}

class SparesTest : public JobManagerFaultsTest {
 protected:
  // Workers w1..wN of one slot each; a job of `ranks` ranks on w1.. with
  // `fault_tolerance`, every rank running, in its group and past its start.
  v1::Job StartTraining(int workers, int ranks, const std::string& fault_tolerance,
                        const std::string& checkpoint = "{dir: /ckpt, every_steps: 10}") {
    for (int w = 1; w <= workers; ++w) {
      links_.push_back(AddWorker("w" + std::to_string(w), 1));
    }
    v1::Job job = *jobs_.Submit(
        FaultSpec(ranks, 24, "fault_tolerance: " + fault_tolerance + "\n", checkpoint),
        false);
    RunRanks(job.id(), Workers(1, ranks));
    return *jobs_.Get(job.id());
  }
  // "w<first>" .. "w<first + count - 1>".
  static std::vector<std::string> Workers(int first, int count) {
    std::vector<std::string> names;
    for (int w = first; w < first + count; ++w) names.push_back("w" + std::to_string(w));
    return names;
  }
  bool Noted(const std::string& job, const std::string& words) {
    for (const v1::JobEvent& e : Events(job)) {
      if (e.has_log() && e.log().text().find(words) != std::string::npos) return true;
    }
    return false;
  }
  std::vector<std::shared_ptr<FakeAgentLink>> links_;
};

TEST_F(SparesTest, ARunningJobHoldsItsSparesAndShowsThem) {
  const v1::Job job = StartTraining(5, 3, "{in_place: true, spares: 2}");
  EXPECT_EQ(Spares(job), (std::vector<std::string>{"w4", "w5"}));
  EXPECT_TRUE(Noted(job.id(), "[trainctl] scheduler: holds 2 of 2 spare slots for its "
                              "replacement ranks, on w4, w5"));
  // A job of its priority waits: the free slots are its spares.
  const v1::Job other = *jobs_.Submit(Spec(1, ""), false);
  EXPECT_EQ(jobs_.Get(other.id())->state(), v1::JOB_STATE_QUEUED);
  EXPECT_THAT(jobs_.Get(other.id())->pending_reason(), HasSubstr("0 of 5 registered slots free"));
}

TEST_F(SparesTest, ALostRankIsReplacedOnASpareAndAFreeSlotBecomesTheNextSpare) {
  const v1::Job job = StartTraining(5, 3, "{in_place: true, min_workers: 2, spares: 2}");
  jobs_.WorkerDisconnected("w2", links_[1].get());
  v1::Job after = *jobs_.Get(job.id());
  EXPECT_EQ(after.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(after.world_size(), 3);
  ASSERT_EQ(after.ranks_size(), 3);
  EXPECT_EQ(after.ranks(2).worker(), "w4");  // the first spare
  EXPECT_EQ(Spares(after), std::vector<std::string>{"w5"});
  // w2 returns: its slot is held as a spare again.
  links_.push_back(AddWorker("w2", 1));
  after = *jobs_.Get(job.id());
  EXPECT_EQ(Spares(after), (std::vector<std::string>{"w2", "w5"}));
}

TEST_F(SparesTest, ItsOwnSpareReplacesARankWhileAHigherPriorityJobWaits) {
  jobs_.SetSchedulingConfig(
      TestPolicy("classes: {low: 0, high: 10}\ndefault_class: low\n"));
  // No checkpoints: never preempted, so the high job waits.
  const v1::Job job = StartTraining(4, 3, "{in_place: true, min_workers: 2, spares: 1}", "{}");
  ASSERT_EQ(Spares(job), std::vector<std::string>{"w4"});
  const v1::Job high = *jobs_.Submit(kHighPriorityJob, false);
  ASSERT_EQ(jobs_.Get(high.id())->state(), v1::JOB_STATE_QUEUED);
  jobs_.WorkerDisconnected("w2", links_[1].get());
  const v1::Job after = *jobs_.Get(job.id());
  EXPECT_EQ(after.world_size(), 3);
  EXPECT_EQ(after.ranks(2).worker(), "w4");
  ASSERT_EQ(links_[3]->Assignments().size(), 1u);
  EXPECT_TRUE(links_[3]->Assignments()[0].joins_in_place());
}

TEST_F(SparesTest, AnotherJobsReplacementLeavesASpareHeldForItAlone) {
  // Job a on w1-w2 holds w3; job b of its priority starts on w4-w5.
  const v1::Job a = StartTraining(5, 2, "{in_place: true, min_workers: 1, spares: 1}");
  ASSERT_EQ(Spares(a), std::vector<std::string>{"w3"});
  const v1::Job b = *jobs_.Submit(
      FaultSpec(2, 24, "fault_tolerance: {in_place: true, min_workers: 1}\n"), false);
  const v1::Job b_running = *jobs_.Get(b.id());
  ASSERT_EQ(b_running.state(), v1::JOB_STATE_RUNNING);
  ASSERT_EQ(b_running.ranks(0).worker(), "w4");
  ASSERT_EQ(b_running.ranks(1).worker(), "w5");
  RunRanks(b.id(), Workers(4, 2));
  // b loses w5: the only free slot is a's spare, so b goes on with one rank.
  jobs_.WorkerDisconnected("w5", links_[4].get());
  const v1::Job b_after = *jobs_.Get(b.id());
  EXPECT_EQ(b_after.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(b_after.world_size(), 1);
  EXPECT_TRUE(links_[2]->Assignments().empty());
  EXPECT_EQ(Spares(*jobs_.Get(a.id())), std::vector<std::string>{"w3"});
}

TEST_F(SparesTest, SparesCostTheirOwnerFairShare) {
  for (int w = 1; w <= 5; ++w) links_.push_back(AddWorker("w" + std::to_string(w), 1));
  const v1::Job job = *jobs_.Submit(
      FaultSpec(3, 24, "fault_tolerance: {in_place: true, spares: 2}\n"), false, "", "alice");
  RunRanks(job.id(), Workers(1, 3));
  ASSERT_EQ(Spares(*jobs_.Get(job.id())).size(), 2u);
  clock_.AdvanceMs(3'600'000);
  for (int r = 0; r < 3; ++r) Exit("w" + std::to_string(r + 1), job.id(), r, 0);
  ASSERT_EQ(jobs_.Get(job.id())->state(), v1::JOB_STATE_SUCCEEDED);
  // Five slots (3 ranks, 2 spares) for an hour, decayed as in
  // job_manager_queue_test.
  EXPECT_NEAR(UsageSlotHours(jobs_, "alice"), 5 * 0.986, 0.01);
}

// A restarted coordinator charges the running job's spares too, and a dry
// run tells the held spares apart from the other free slots.
TEST_F(SparesTest, SparesAreChargedAfterARestartAndShownByADryRun) {
  for (int w = 1; w <= 5; ++w) links_.push_back(AddWorker("w" + std::to_string(w), 1));
  const v1::Job job = *jobs_.Submit(
      FaultSpec(3, 24, "fault_tolerance: {in_place: true, spares: 2}\n"), false, "", "alice");
  RunRanks(job.id(), Workers(1, 3));
  ASSERT_EQ(Spares(*jobs_.Get(job.id())).size(), 2u);
  const v1::DryRunPlan plan =
      jobs_.DryRun(FaultSpec(1, 24, "fault_tolerance: {max_restarts: 0}\n"))->plan();
  EXPECT_EQ(plan.slots_free(), 2);
  EXPECT_EQ(plan.slots_spare(), 2);

  clock_.AdvanceMs(3'600'000);
  ASSERT_TRUE(jobs_.Flush().ok());
  EventHub events;
  Rendezvous rendezvous;
  JobManager again(clock_, events, rendezvous, store_, 5'000, 1'000);
  ASSERT_TRUE(again.Recover().ok());
  // Five slots (3 ranks, 2 spares) for an hour, as the running coordinator
  // charges them (SparesCostTheirOwnerFairShare).
  EXPECT_NEAR(UsageSlotHours(again, "alice"), 5 * 0.986, 0.01);
}

TEST_F(SparesTest, SparesNeedInPlaceRecovery) {
  absl::StatusOr<v1::Job> refused =
      jobs_.Submit(FaultSpec(2, 24, "fault_tolerance: {spares: 1}\n"), false);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("fault_tolerance.spares: spares serve in-place recovery only"));
}

TEST_F(SparesTest, AFinishedJobHoldsNone) {
  const v1::Job job = StartTraining(3, 2, "{in_place: true, spares: 1}");
  ASSERT_EQ(Spares(job), std::vector<std::string>{"w3"});
  Exit("w1", job.id(), 0, 0);
  Exit("w2", job.id(), 1, 0);
  const v1::Job after = *jobs_.Get(job.id());
  EXPECT_EQ(after.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_TRUE(Spares(after).empty());
}

}  // namespace
}  // namespace trainctl::coordinator
