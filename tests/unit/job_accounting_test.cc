// Accounting (trainctl history): times and slot-hours from a job's
// transitions, cut to a window.

#include "coordinator/job_accounting.h"

#include <gtest/gtest.h>

namespace trainctl::coordinator {
namespace {

constexpr int64_t kHour = 3'600'000;
constexpr int64_t kT0 = 1'700'000'000'000;  // submission

// Builds a job record the way the coordinator writes one.
class JobRecord {
 public:
  JobRecord() {
    job_.set_id("job-1");
    job_.set_owner("alice");
    job_.set_created_unix_ms(kT0);
    job_.set_state(v1::JOB_STATE_QUEUED);
  }
  JobRecord& To(v1::JobState to, int64_t at, int slots = 0, int gpu_slots = 0) {
    v1::Transition* t = job_.add_transitions();
    t->set_from(job_.state());
    t->set_to(to);
    t->set_time_unix_ms(at);
    t->set_slots(slots);
    t->set_gpu_slots(gpu_slots);
    job_.set_state(to);
    if (to == v1::JOB_STATE_RUNNING) {
      job_.set_world_size(slots);
      job_.set_generation(job_.generation() + 1);
    }
    if (to == v1::JOB_STATE_SUCCEEDED || to == v1::JOB_STATE_FAILED ||
        to == v1::JOB_STATE_CANCELLED) {
      job_.set_finished_unix_ms(at);
    }
    return *this;
  }
  const v1::Job& job() const { return job_; }

 private:
  v1::Job job_;
};

TEST(JobAccountingTest, AFinishedJobsTimesAndSlotHours) {
  JobRecord r;
  r.To(v1::JOB_STATE_RUNNING, kT0 + 60'000, 2)
      .To(v1::JOB_STATE_SUCCEEDED, kT0 + 60'000 + kHour);
  v1::Job job = r.job();
  job.mutable_latest_train()->mutable_values()->insert({"loss", 0.25});
  const v1::JobAccount a = AccountJob(job, {}, kT0 + 10 * kHour);
  EXPECT_EQ(a.job_id(), "job-1");
  EXPECT_EQ(a.owner(), "alice");
  EXPECT_EQ(a.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(a.waited_ms(), 60'000);
  EXPECT_EQ(a.first_started_unix_ms(), kT0 + 60'000);
  EXPECT_EQ(a.finished_unix_ms(), kT0 + 60'000 + kHour);
  EXPECT_EQ(a.elapsed_ms(), kHour);
  EXPECT_EQ(a.running_ms(), kHour);
  EXPECT_DOUBLE_EQ(a.slot_hours(), 2.0);
  EXPECT_DOUBLE_EQ(a.gpu_hours(), 0.0);
  EXPECT_EQ(a.ranks(), 2);
  EXPECT_EQ(a.final_train().values().at("loss"), 0.25);
}

// Each generation is charged with its own ranks; the wait between them is
// elapsed time but no slot time.
TEST(JobAccountingTest, EachRunningPeriodCountsWithItsOwnRanks) {
  JobRecord r;
  r.To(v1::JOB_STATE_RUNNING, kT0, 4, 4)
      .To(v1::JOB_STATE_RESTARTING, kT0 + kHour)
      .To(v1::JOB_STATE_RUNNING, kT0 + 2 * kHour, 2, 2)
      .To(v1::JOB_STATE_PREEMPTED, kT0 + 3 * kHour)
      .To(v1::JOB_STATE_RUNNING, kT0 + 3 * kHour + kHour / 2, 1, 0)
      .To(v1::JOB_STATE_FAILED, kT0 + 4 * kHour + kHour / 2);
  const v1::JobAccount a = AccountJob(r.job(), {}, kT0 + 10 * kHour);
  EXPECT_EQ(a.elapsed_ms(), 4 * kHour + kHour / 2);
  EXPECT_EQ(a.running_ms(), 3 * kHour);
  EXPECT_DOUBLE_EQ(a.slot_hours(), 4 + 2 + 1);
  EXPECT_DOUBLE_EQ(a.gpu_hours(), 4 + 2);
  EXPECT_EQ(a.ranks(), 1);
  EXPECT_EQ(a.generations(), 3);
}

TEST(JobAccountingTest, ARunningJobCountsUpToNow) {
  JobRecord r;
  r.To(v1::JOB_STATE_RUNNING, kT0 + kHour, 3);
  const v1::JobAccount a = AccountJob(r.job(), {}, kT0 + 3 * kHour);
  EXPECT_EQ(a.finished_unix_ms(), 0);
  EXPECT_EQ(a.elapsed_ms(), 2 * kHour);
  EXPECT_DOUBLE_EQ(a.slot_hours(), 6.0);
}

TEST(JobAccountingTest, AJobThatNeverRanWaitedItsWholeLife) {
  JobRecord queued;
  const v1::JobAccount waiting = AccountJob(queued.job(), {}, kT0 + kHour);
  EXPECT_EQ(waiting.waited_ms(), kHour);
  EXPECT_EQ(waiting.first_started_unix_ms(), 0);
  EXPECT_EQ(waiting.elapsed_ms(), 0);
  EXPECT_EQ(waiting.slot_hours(), 0);

  JobRecord cancelled;
  cancelled.To(v1::JOB_STATE_CANCELLED, kT0 + 120'000);
  const v1::JobAccount a = AccountJob(cancelled.job(), {}, kT0 + kHour);
  EXPECT_EQ(a.waited_ms(), 120'000);
  EXPECT_EQ(a.elapsed_ms(), 0);
}

// Usage inside [since, until) only; the job's own times stay whole.
TEST(JobAccountingTest, SlotTimeIsCutToTheWindow) {
  JobRecord r;
  r.To(v1::JOB_STATE_RUNNING, kT0, 2).To(v1::JOB_STATE_SUCCEEDED, kT0 + 4 * kHour);
  const AccountWindow window{kT0 + kHour, kT0 + 2 * kHour};
  const v1::JobAccount a = AccountJob(r.job(), window, kT0 + 10 * kHour);
  EXPECT_EQ(a.running_ms(), kHour);
  EXPECT_DOUBLE_EQ(a.slot_hours(), 2.0);
  EXPECT_EQ(a.elapsed_ms(), 4 * kHour);

  JobRecord running;
  running.To(v1::JOB_STATE_RUNNING, kT0, 1);
  // An open end stops at now, never in the future.
  EXPECT_DOUBLE_EQ(
      AccountJob(running.job(), {kT0, kT0 + 5 * kHour}, kT0 + kHour).slot_hours(), 1.0);
}

TEST(JobAccountingTest, AJobExistedInAWindowItOverlaps) {
  JobRecord r;
  r.To(v1::JOB_STATE_RUNNING, kT0 + kHour, 1)
      .To(v1::JOB_STATE_SUCCEEDED, kT0 + 2 * kHour);
  EXPECT_TRUE(ExistedIn(r.job(), {}));
  EXPECT_TRUE(ExistedIn(r.job(), {kT0 + kHour + 1, 0}));
  EXPECT_TRUE(ExistedIn(r.job(), {0, kT0 + 1}));  // submitted, still queued
  EXPECT_FALSE(ExistedIn(r.job(), {kT0 + 2 * kHour + 1, 0}));  // ended before
  EXPECT_FALSE(ExistedIn(r.job(), {0, kT0}));  // submitted at the end
  JobRecord running;
  running.To(v1::JOB_STATE_RUNNING, kT0, 1);
  EXPECT_TRUE(ExistedIn(running.job(), {kT0 + 100 * kHour, 0}));
}

// Records from before transitions carried slots: the job's last world size
// (and its ranks on GPUs) stand for every period.
TEST(JobAccountingTest, OldRecordsCountTheLastWorldSize) {
  JobRecord r;
  r.To(v1::JOB_STATE_RUNNING, kT0, 0).To(v1::JOB_STATE_SUCCEEDED, kT0 + kHour);
  v1::Job job = r.job();
  job.set_world_size(3);
  for (int i = 0; i < 3; ++i) job.add_ranks()->set_gpu(i < 2);
  const v1::JobAccount a = AccountJob(job, {}, kT0 + kHour);
  EXPECT_DOUBLE_EQ(a.slot_hours(), 3.0);
  EXPECT_DOUBLE_EQ(a.gpu_hours(), 2.0);
}

}  // namespace
}  // namespace trainctl::coordinator
