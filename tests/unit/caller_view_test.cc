// CallerView: the one definition of what a caller sees, used by the gRPC
// Jobs service and the HTTP routes alike.

#include "coordinator/caller_view.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/owned_jobs_fixture.h"

namespace trainctl::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using auth::Caller;

std::vector<std::string> Ids(const std::vector<v1::Job>& jobs) {
  std::vector<std::string> ids;
  for (const v1::Job& job : jobs) ids.push_back(job.id());
  return ids;
}

const Caller kAlice{"alice", Caller::Role::kUser};
const Caller kRoot{"root", Caller::Role::kAdmin};
const Caller kWorker{"w1", Caller::Role::kWorker};

class CallerViewTest : public OwnedJobsTest {};

TEST_F(CallerViewTest, APersonSeesTheirJobsAnAdminEveryonesAWorkerNone) {
  EXPECT_THAT(Ids(CallerView(jobs_, kAlice).Jobs()), ElementsAre("job-1"));
  EXPECT_THAT(Ids(CallerView(jobs_, kRoot).Jobs()), ElementsAre("job-1", "job-2"));
  EXPECT_TRUE(CallerView(jobs_, kWorker).Jobs().empty());
  EXPECT_TRUE(CallerView(jobs_, kAlice).Jobs({v1::JOB_STATE_QUEUED}).empty());
}

// ListJobs' pages: by count, by bytes (never fewer than one job), after
// a token that is a job id, and only the caller's jobs.
TEST_F(CallerViewTest, JobsComePageByPage) {
  const CallerView root(jobs_, kRoot);
  JobManager::Page first = *root.JobsPage({}, "", 1, SIZE_MAX);
  EXPECT_THAT(Ids(first.jobs), ElementsAre("job-1"));
  EXPECT_TRUE(first.more);
  JobManager::Page second = *root.JobsPage({}, "job-1", 1, SIZE_MAX);
  EXPECT_THAT(Ids(second.jobs), ElementsAre("job-2"));
  EXPECT_FALSE(second.more);
  JobManager::Page tiny = *root.JobsPage({}, "", 100, /*max_bytes=*/1);
  EXPECT_THAT(Ids(tiny.jobs), ElementsAre("job-1"));
  EXPECT_TRUE(tiny.more);
  EXPECT_THAT(Ids(root.JobsPage({}, "job-7", 100, SIZE_MAX)->jobs),
              ::testing::IsEmpty());  // a deleted last job: nothing after
  EXPECT_THAT(Ids(CallerView(jobs_, kAlice).JobsPage({}, "", 1, SIZE_MAX)->jobs),
              ElementsAre("job-1"));
  EXPECT_FALSE(CallerView(jobs_, kAlice).JobsPage({}, "", 1, SIZE_MAX)->more);
  absl::Status bad = root.JobsPage({}, "nope", 1, SIZE_MAX).status();
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.message()), HasSubstr("page_token"));
}

TEST_F(CallerViewTest, AnotherUsersJobIsRefusedNamingTheOwnerAndTheAction) {
  EXPECT_TRUE(CallerView(jobs_, kAlice).Job("job-1", "read").ok());
  absl::Status refused = CallerView(jobs_, kAlice).Job("job-2", "cancel").status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(refused.message()),
              HasSubstr("job job-2 belongs to bob; only bob or an admin may "
                        "cancel it"));
  EXPECT_EQ(CallerView(jobs_, kAlice).Job("job-9", "read").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_TRUE(CallerView(jobs_, kRoot).Job("job-2", "cancel").ok());
}

// GetHistory: the caller's jobs, another owner's only for an admin; pages
// by a job-id token like ListJobs.
TEST_F(CallerViewTest, HistoryIsTheCallersAndPagesLikeTheList) {
  auto ids = [](const v1::GetHistoryResponse& history) {
    std::vector<std::string> out;
    for (const v1::JobAccount& job : history.jobs()) out.push_back(job.job_id());
    return out;
  };
  const int64_t now = clock_.NowUnixMs();
  v1::GetHistoryRequest request;
  absl::StatusOr<v1::GetHistoryResponse> mine = CallerView(jobs_, kAlice).History(request, now);
  ASSERT_TRUE(mine.ok()) << mine.status();
  EXPECT_THAT(ids(*mine), ElementsAre("job-1"));
  EXPECT_EQ(mine->jobs(0).owner(), "alice");
  EXPECT_EQ(mine->as_of_unix_ms(), now);
  EXPECT_THAT(ids(*CallerView(jobs_, kRoot).History(request, now)),
              ElementsAre("job-1", "job-2"));

  request.set_owner("bob");
  absl::Status refused = CallerView(jobs_, kAlice).History(request, now).status();
  EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("bob's jobs"));
  EXPECT_THAT(ids(*CallerView(jobs_, kRoot).History(request, now)), ElementsAre("job-2"));

  request.clear_owner();
  request.set_page_size(1);
  v1::GetHistoryResponse first = *CallerView(jobs_, kRoot).History(request, now);
  EXPECT_THAT(ids(first), ElementsAre("job-1"));
  EXPECT_EQ(first.next_page_token(), "job-1");
  request.set_page_token(first.next_page_token());
  v1::GetHistoryResponse second = *CallerView(jobs_, kRoot).History(request, now);
  EXPECT_THAT(ids(second), ElementsAre("job-2"));
  EXPECT_EQ(second.next_page_token(), "");

  request.clear_page_token();
  request.set_until_unix_ms(1);  // before every submission
  EXPECT_TRUE(CallerView(jobs_, kRoot).History(request, now)->jobs().empty());
  request.set_since_unix_ms(5);
  EXPECT_EQ(CallerView(jobs_, kRoot).History(request, now).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(CallerView(jobs_, kWorker).History({}, now)->jobs().empty());
}

TEST_F(CallerViewTest, WorkersShowOnlyTheCallersRanks) {
  std::vector<v1::WorkerInfo> mine = CallerView(jobs_, kAlice).Workers();
  ASSERT_EQ(mine.size(), 1u);
  ASSERT_EQ(mine[0].ranks_size(), 1);
  EXPECT_EQ(mine[0].ranks(0).job_id(), "job-1");
  EXPECT_EQ(mine[0].ranks(0).generation(), 1);
  EXPECT_EQ(mine[0].ranks(0).rank(), 0);
  std::vector<v1::WorkerInfo> all = CallerView(jobs_, kRoot).Workers();
  ASSERT_EQ(all.size(), 1u);
  ASSERT_EQ(all[0].ranks_size(), 2);
  EXPECT_EQ(all[0].ranks(1).job_id(), "job-2");
}

}  // namespace
}  // namespace trainctl::coordinator
