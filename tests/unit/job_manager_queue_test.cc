// The JobManager under a scheduling policy: priority classes in specs,
// quotas, fair share from the slot time jobs really held, the queue view,
// reloads, and the decisions kept in each job's log.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "job_manager_fixture.h"

namespace trainctl::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr int64_t kHour = 3'600'000;

std::string WithPriority(int ranks, const std::string& priority) {
  return Spec(ranks, "fault_tolerance: {max_restarts: 0}\npriority: " + priority + "\n");
}

std::vector<std::string> QueueIds(const JobManager& jobs) {
  std::vector<std::string> ids;
  const v1::GetQueueResponse queue = jobs.Queue();
  for (const v1::QueueEntry& e : queue.jobs()) ids.push_back(e.job_id());
  return ids;
}

std::vector<std::string> SchedulerNotes(const std::vector<v1::JobEvent>& events) {
  std::vector<std::string> notes;
  for (const v1::JobEvent& e : events) {
    if (e.has_log() && e.log().text().rfind("[trainctl] scheduler:", 0) == 0) {
      notes.push_back(e.log().text());
    }
  }
  return notes;
}

class JobManagerQueueTest : public JobManagerTest {
 protected:
  void Finish(const std::string& worker, const v1::Job& job) {
    const v1::Job now = *jobs_.Get(job.id());
    for (const v1::RankInfo& r : now.ranks()) {
      Exit(r.worker(), job.id(), r.rank(), 0);
    }
    ASSERT_EQ(jobs_.Get(job.id())->state(), v1::JOB_STATE_SUCCEEDED) << worker;
  }
};

TEST_F(JobManagerQueueTest, AHigherClassStartsFirstAndTheSpecKeepsItsClass) {
  jobs_.SetSchedulingConfig(
      TestPolicy("classes: {low: 0, high: 10}\ndefault_class: low\n"));
  AddWorker("w1", 1);
  v1::Job busy = *jobs_.Submit(Spec(1), false);
  EXPECT_EQ(busy.spec().priority(), "low");  // the default, written in
  v1::Job low = *jobs_.Submit(WithPriority(1, "low"), false);
  v1::Job high = *jobs_.Submit(WithPriority(1, "high"), false);
  EXPECT_THAT(QueueIds(jobs_), ElementsAre(high.id(), low.id()));
  const v1::GetQueueResponse queue = jobs_.Queue();
  EXPECT_EQ(queue.jobs(0).position(), 1);
  EXPECT_EQ(queue.jobs(0).priority_class(), "high");
  EXPECT_EQ(queue.jobs(0).priority(), 10);
  EXPECT_THAT(queue.jobs(0).reason(), HasSubstr("needs 1 slots"));
  EXPECT_THAT(queue.jobs(1).reason(), HasSubstr("after job " + high.id()));
  ASSERT_EQ(queue.classes_size(), 2);
  EXPECT_EQ(queue.classes(0).name(), "high");
  EXPECT_TRUE(queue.classes(1).is_default());
  EXPECT_EQ(queue.policy_origin(), "test.yaml");

  Finish("w1", busy);
  EXPECT_EQ(jobs_.Get(high.id())->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(jobs_.Get(low.id())->state(), v1::JOB_STATE_QUEUED);
}

TEST_F(JobManagerQueueTest, APriorityChangeReordersTheQueueAtOnceAndIsLogged) {
  jobs_.SetSchedulingConfig(TestPolicy(
      "classes: {low: 0, high: 10}\ndefault_class: low\n"
      "users: {\"*\": {max_class: low}}\n"));
  AddWorker("w1", 1);
  const v1::Job busy = *jobs_.Submit(Spec(1), false, "", "ann");
  const v1::Job first = *jobs_.Submit(Spec(1), false, "", "ann");
  const v1::Job second = *jobs_.Submit(Spec(1), false, "", "ann");
  EXPECT_THAT(QueueIds(jobs_), ElementsAre(first.id(), second.id()));
  using Limit = JobManager::PriorityLimit;
  absl::StatusOr<v1::Job> above =
      jobs_.SetPriority(second.id(), "high", Limit::kOwnersMaximum, "ann");
  ASSERT_FALSE(above.ok());
  EXPECT_THAT(above.status().message(),
              HasSubstr("class 'high' (10) is above the highest user ann may ask for"));
  absl::StatusOr<v1::Job> typo =
      jobs_.SetPriority(second.id(), "hihg", Limit::kAnyClass, "root");
  ASSERT_FALSE(typo.ok());
  EXPECT_THAT(typo.status().message(), HasSubstr("did you mean 'high'?"));
  // An admin may go past the owner's maximum.
  absl::StatusOr<v1::Job> moved =
      jobs_.SetPriority(second.id(), "high", Limit::kAnyClass, "root");
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->spec().priority(), "high");
  EXPECT_THAT(QueueIds(jobs_), ElementsAre(second.id(), first.id()));
  EXPECT_THAT(SchedulerNotes(Events(second.id())),
              ::testing::Contains("[trainctl] scheduler: priority changed from "
                                  "'low' to 'high' by root"));
  // Kept in the stored spec: a restarted coordinator has it.
  ASSERT_TRUE(jobs_.Flush().ok());
  EXPECT_EQ(store_.LoadAll()->jobs[2].job.spec().priority(), "high");
  Finish("w1", busy);
  EXPECT_EQ(jobs_.Get(second.id())->state(), v1::JOB_STATE_RUNNING);
  absl::StatusOr<v1::Job> ended =
      jobs_.SetPriority(busy.id(), "low", Limit::kAnyClass, "root");
  ASSERT_FALSE(ended.ok());
  EXPECT_EQ(ended.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(JobManagerQueueTest, RefusesAnUnknownClassOrOneAboveTheUsersMaximum) {
  jobs_.SetSchedulingConfig(TestPolicy(
      "classes: {low: 0, high: 10}\ndefault_class: low\n"
      "users: {\"*\": {max_class: low}, boss: {max_class: high}}\n"));
  absl::StatusOr<v1::Job> typo = jobs_.Submit(WithPriority(1, "hihg"), false, "", "ann");
  ASSERT_FALSE(typo.ok());
  EXPECT_EQ(typo.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(typo.status().message(),
              HasSubstr("priority: unknown priority class 'hihg' (did you mean 'high'?"));
  absl::StatusOr<v1::Job> above = jobs_.Submit(WithPriority(1, "high"), false, "", "ann");
  ASSERT_FALSE(above.ok());
  EXPECT_THAT(above.status().message(),
              HasSubstr("class 'high' (10) is above the highest user ann may ask for"));
  // The dry run says the same, and nothing was queued.
  EXPECT_FALSE(jobs_.DryRun(WithPriority(1, "high"), "", "ann").ok());
  EXPECT_TRUE(jobs_.List({}).empty());
  EXPECT_TRUE(jobs_.Submit(WithPriority(1, "high"), false, "", "boss").ok());
}

TEST_F(JobManagerQueueTest, AUserOverQuotaWaitsWhileAnotherUsersJobStarts) {
  jobs_.SetSchedulingConfig(TestPolicy("users: {alice: {slots: 1}}\n"));
  AddWorker("w1", 3);
  v1::Job first = *jobs_.Submit(Spec(1), false, "", "alice");
  v1::Job second = *jobs_.Submit(Spec(1), false, "", "alice");
  v1::Job bobs = *jobs_.Submit(Spec(1), false, "", "bob");
  EXPECT_EQ(jobs_.Get(first.id())->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(jobs_.Get(second.id())->state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(jobs_.Get(second.id())->pending_reason(),
            "over quota: user alice's jobs use 1 of 1 slots and it needs 1");
  EXPECT_EQ(jobs_.Get(bobs.id())->state(), v1::JOB_STATE_RUNNING);
  EXPECT_THAT(SchedulerNotes(Events(second.id())),
              ElementsAre("[trainctl] scheduler: waits (quota): over quota: user "
                          "alice's jobs use 1 of 1 slots and it needs 1"));
  // The quota frees with alice's first job.
  Finish("w1", first);
  EXPECT_EQ(jobs_.Get(second.id())->state(), v1::JOB_STATE_RUNNING);
}

TEST_F(JobManagerQueueTest, AJobThatCanNeverFitHoldsUpNoSmallerOne) {
  AddWorker("w1", 2);
  v1::Job huge = *jobs_.Submit(Spec(8), false);
  v1::Job small = *jobs_.Submit(Spec(1), false);
  EXPECT_EQ(jobs_.Get(huge.id())->state(), v1::JOB_STATE_QUEUED);
  EXPECT_THAT(jobs_.Get(huge.id())->pending_reason(),
              HasSubstr("the cluster has 2 in all; it waits for more workers "
                        "and holds up no other job"));
  EXPECT_EQ(jobs_.Get(small.id())->state(), v1::JOB_STATE_RUNNING);
}

TEST_F(JobManagerQueueTest, TheUserWhoUsedLessGoesFirstWithinAClass) {
  AddWorker("w1", 1);
  v1::Job alices_past = *jobs_.Submit(Spec(1), false, "", "alice");
  clock_.AdvanceMs(2 * kHour);
  Finish("w1", alices_past);
  v1::Job busy = *jobs_.Submit(Spec(1), false, "", "carol");
  clock_.AdvanceMs(kHour / 60);
  v1::Job alices = *jobs_.Submit(Spec(1), false, "", "alice");
  v1::Job bobs = *jobs_.Submit(Spec(1), false, "", "bob");
  // bob has used nothing, alice two slot-hours (less their decay).
  EXPECT_THAT(QueueIds(jobs_), ElementsAre(bobs.id(), alices.id()));
  const v1::GetQueueResponse queue = jobs_.Queue();
  EXPECT_EQ(queue.jobs(0).owner_usage_slot_hours(), 0);
  // 24/ln 2 * (1 - 2^(-1/12)) * 2^(-1/1440): 1.9424.
  EXPECT_NEAR(queue.jobs(1).owner_usage_slot_hours(), 1.9424, 0.001);
  Finish("w1", busy);
  EXPECT_EQ(jobs_.Get(bobs.id())->state(), v1::JOB_STATE_RUNNING);
}

TEST_F(JobManagerQueueTest, UsageIsRebuiltFromTheStoredJobsAfterARestart) {
  AddWorker("w1", 2);
  v1::Job job = *jobs_.Submit(Spec(2), false, "", "alice");
  clock_.AdvanceMs(kHour);
  Finish("w1", job);
  ASSERT_TRUE(jobs_.Flush().ok());
  const double before = UsageSlotHours(jobs_, "alice");
  EXPECT_NEAR(before, 2 * 0.986, 0.01);  // two slots for an hour, decayed

  EventHub events;
  Rendezvous rendezvous;
  JobManager again(clock_, events, rendezvous, store_, 5'000, 1'000);
  ASSERT_TRUE(again.Recover().ok());
  EXPECT_NEAR(UsageSlotHours(again, "alice"), before, 1e-6);
}

TEST_F(JobManagerQueueTest, AReloadThatDropsAClassSaysSoInTheJobsLog) {
  jobs_.SetSchedulingConfig(
      TestPolicy("classes: {low: 0, high: 10}\ndefault_class: low\n"));
  v1::Job job = *jobs_.Submit(WithPriority(1, "high"), false);
  jobs_.SetSchedulingConfig(TestPolicy("classes: {low: 0, top: 20}\ndefault_class: low\n"));
  EXPECT_EQ(jobs_.Queue().jobs(0).priority(), 0);
  EXPECT_THAT(SchedulerNotes(Events(job.id())),
              testing::Contains(HasSubstr("priority class 'high' is no longer in "
                                          "test.yaml; the job counts as 'low'")));
}

TEST_F(JobManagerQueueTest, OtherUsersJobNamesAreLeftOutForNonAdmins) {
  v1::Job mine = *jobs_.Submit(Spec(1), false, "", "ann");
  v1::Job theirs = *jobs_.Submit(Spec(1), false, "", "bob");
  const std::string viewer = "ann";
  const v1::GetQueueResponse queue = jobs_.Queue(&viewer);
  ASSERT_EQ(queue.jobs_size(), 2);
  EXPECT_EQ(queue.jobs(0).name(), "t");
  EXPECT_EQ(queue.jobs(1).name(), "");
  EXPECT_EQ(queue.jobs(1).owner(), "bob");
  EXPECT_EQ(queue.jobs(1).job_id(), theirs.id());
  EXPECT_EQ(jobs_.Queue().jobs(1).name(), "t");
  (void)mine;
}

}  // namespace
}  // namespace trainctl::coordinator
