// Retention and deletion: finished jobs go by age, by count (the owner with
// the most losing theirs first) and one by one; unfinished ones are bounded
// per user and never deleted.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/job_manager_fixture.h"

namespace trainctl::coordinator {
namespace {

using ::testing::HasSubstr;

TEST_F(JobManagerTest, DeleteForgetsAFinishedJobButNotARunningOne) {
  AddWorker("w1", 1);
  v1::Job job = *jobs_.Submit(Spec(1), false);
  EXPECT_EQ(jobs_.Delete(job.id()).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(jobs_.Cancel(job.id(), "").ok());
  Exit("w1", job.id(), 0, -15);
  ASSERT_TRUE(jobs_.Delete(job.id()).ok());
  EXPECT_EQ(jobs_.Get(job.id()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(jobs_.Delete(job.id()).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(store_.LoadAll()->jobs.empty());
  bool closed = false;
  EXPECT_TRUE(events_.WaitForEvents(job.id(), 1, 0, &closed)->empty());
  EXPECT_TRUE(closed);  // a watcher of a deleted job ends
  EXPECT_EQ(jobs_.Submit(Spec(1), false)->id(), "job-2");  // ids never reused
}

TEST_F(JobManagerTest, RetentionDeletesFinishedJobsByCountThenByAge) {
  AddWorker("w1", 1);
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    v1::Job job = *jobs_.Submit(Spec(1), false);
    Exit("w1", job.id(), 0, 0);
    ids.push_back(job.id());
  }
  v1::Job running = *jobs_.Submit(Spec(1), false);
  jobs_.SetRetention({/*max_finished_jobs=*/2, /*max_age_ms=*/0});
  jobs_.CheckLeases();
  EXPECT_FALSE(jobs_.Get(ids[0]).ok());  // the oldest finished one
  EXPECT_TRUE(jobs_.Get(ids[1]).ok());
  EXPECT_TRUE(jobs_.Get(ids[2]).ok());
  jobs_.SetRetention({0, /*max_age_ms=*/1'000});
  clock_.AdvanceMs(2'000);
  jobs_.Heartbeat("w1");
  jobs_.CheckLeases();
  EXPECT_FALSE(jobs_.Get(ids[1]).ok());
  EXPECT_FALSE(jobs_.Get(ids[2]).ok());
  EXPECT_TRUE(jobs_.Get(running.id()).ok());  // never an unfinished one
  EXPECT_EQ(store_.LoadAll()->jobs.size(), 1u);
}

TEST_F(JobManagerTest, OneUsersUnfinishedJobsAreBounded) {
  int accepted = 0;
  absl::Status refused;
  for (int i = 0; i < 1001 && refused.ok(); ++i) {
    absl::StatusOr<v1::Job> job = jobs_.Submit(Spec(1), false, "", "mallory");
    if (job.ok()) {
      ++accepted;
    } else {
      refused = job.status();
    }
  }
  EXPECT_EQ(accepted, 1000);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("mallory"));
  EXPECT_TRUE(jobs_.Submit(Spec(1), false, "", "alice").ok());
}

TEST_F(JobManagerTest, AFloodOfOneUsersJobsDeletesTheirHistoryNotOthers) {
  AddWorker("w1", 1);
  auto finish = [&](const std::string& owner) {
    v1::Job job = *jobs_.Submit(Spec(1), false, "", owner);
    Exit("w1", job.id(), 0, 0);
    return job.id();
  };
  const std::string alices_first = finish("alice");
  const std::string alices_second = finish("alice");
  std::vector<std::string> mallorys;
  for (int i = 0; i < 5; ++i) mallorys.push_back(finish("mallory"));
  jobs_.SetRetention({/*max_finished_jobs=*/4, /*max_age_ms=*/0});
  jobs_.CheckLeases();
  EXPECT_TRUE(jobs_.Get(alices_first).ok());  // the oldest, but not hers
  EXPECT_TRUE(jobs_.Get(alices_second).ok());
  for (int i = 0; i < 3; ++i) EXPECT_FALSE(jobs_.Get(mallorys[i]).ok()) << i;
  EXPECT_TRUE(jobs_.Get(mallorys[3]).ok());
  EXPECT_TRUE(jobs_.Get(mallorys[4]).ok());
  EXPECT_EQ(store_.LoadAll()->jobs.size(), 4u);
}

}  // namespace
}  // namespace trainctl::coordinator
