// The scheduling policy on a real cluster (issue 17): a coordinator started
// with --scheduling, users with their own tokens, one 3-slot worker. A user
// over quota waits while another user's job starts, a job that can never
// fit holds up no smaller one, `trainctl queue` shows both and why, and a
// SIGHUP with a new file lets the waiting job start. `trainctl history`
// then accounts each user's jobs.

#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <grpcpp/create_channel.h>
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "local_cluster.h"
#include "tests/common/scoped_temp_dir.h"

namespace trainctl::testing {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

constexpr char kPolicy[] =
    "classes: {low: 0, normal: 10}\n"
    "default_class: normal\n"
    "users: {alice: {slots: 1}}\n";

// Long enough to be still running when the test looks; cancelled after.
std::string LongJob(int ranks) { return SmallJobSpec(ranks, 2000, 1000); }

class SchedulingTest : public ::testing::Test {
 protected:
  SchedulingTest() {
    WriteText(policy_, kPolicy);
    ClusterOptions options;
    options.coordinator_flags = {"--scheduling", policy_};
    cluster_ = std::make_unique<LocalCluster>(/*workers=*/1, /*slots=*/3,
                                              /*cpus=*/1, options);
    alice_ = cluster_->AddUser("alice");
    bob_ = cluster_->AddUser("bob");
  }

  v1::Job SubmitAs(const std::string& token, const std::string& spec) {
    auto stub = v1::Jobs::NewStub(
        grpc::CreateChannel(cluster_->address(), cluster_->Credentials(token)));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + seconds(30));
    v1::SubmitJobRequest req;
    req.set_spec_text(spec);
    v1::SubmitJobResponse resp;
    grpc::Status s = stub->SubmitJob(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.job();
  }

  // Polls the coordinator's log for `text` (bounded).
  bool WaitForLog(const std::string& text) {
    const auto deadline = std::chrono::steady_clock::now() + seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream log(cluster_->dir() + "/coordinator.log");
      const std::string seen((std::istreambuf_iterator<char>(log)), {});
      if (seen.find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  v1::Job WaitRunning(const std::string& id) {
    return cluster_->WaitForJob(
        id, [](const v1::Job& j) { return j.state() == v1::JOB_STATE_RUNNING; },
        seconds(60));
  }

  ScopedTempDir files_{"trainctl-scheduling"};
  std::string policy_ = files_.path() + "/scheduling.yaml";
  std::unique_ptr<LocalCluster> cluster_;
  std::string alice_, bob_;
};

TEST_F(SchedulingTest, QuotasAndNeverFitsBlockNoOneAndAReloadTakesEffect) {
  const v1::Job alices_first = SubmitAs(alice_, LongJob(1));
  EXPECT_EQ(alices_first.spec().priority(), "normal");
  EXPECT_EQ(WaitRunning(alices_first.id()).state(), v1::JOB_STATE_RUNNING);
  const v1::Job alices_second = SubmitAs(alice_, LongJob(1));
  const v1::Job huge = SubmitAs(bob_, LongJob(8));
  const v1::Job bobs = SubmitAs(bob_, LongJob(1));
  // bob's small job starts behind both waiting ones.
  EXPECT_EQ(WaitRunning(bobs.id()).state(), v1::JOB_STATE_RUNNING);
  v1::Job waiting = cluster_->GetJob(alices_second.id());
  EXPECT_EQ(waiting.state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(waiting.pending_reason(),
            "over quota: user alice's jobs use 1 of 1 slots and it needs 1");
  EXPECT_THAT(cluster_->GetJob(huge.id()).pending_reason(),
              HasSubstr("holds up no other job"));

  CliResult queue = cluster_->Cli({"queue"});
  ASSERT_EQ(queue.exit_code, 0) << queue.output;
  EXPECT_THAT(queue.output, HasSubstr("policy: " + policy_));
  EXPECT_THAT(queue.output, HasSubstr("normal 10 (default)"));
  EXPECT_THAT(queue.output, HasSubstr(alices_second.id()));
  EXPECT_THAT(queue.output, HasSubstr("over quota"));
  EXPECT_THAT(queue.output, HasSubstr(huge.id()));
  // A priority the policy does not have is refused by the CLI's submit.
  const std::string typo = cluster_->WriteFile(
      "typo.yaml", LongJob(1) + "priority: urgent\n");
  CliResult refused = cluster_->Cli({"submit", typo});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_THAT(refused.output, HasSubstr("priority: unknown priority class 'urgent'"));

  // A file that does not parse changes nothing.
  WriteText(policy_, "users: {alice: {slots: lots}}\n");
  ::kill(cluster_->coordinator_pid(), SIGHUP);
  EXPECT_TRUE(WaitForLog("users.alice.slots: must be an integer"));
  EXPECT_TRUE(WaitForLog("the scheduling policy in force stays"));
  // The operator raises alice's quota; bob's small job makes room.
  WriteText(policy_,
            "classes: {low: 0, normal: 10}\ndefault_class: normal\n"
            "users: {alice: {slots: 2}}\n");
  CliResult cancel = cluster_->Cli({"cancel", bobs.id()});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.output;
  cluster_->WaitForJob(
      bobs.id(), [](const v1::Job& j) { return j.state() == v1::JOB_STATE_CANCELLED; },
      seconds(60));
  // Still over the old quota, with a free slot.
  EXPECT_EQ(cluster_->GetJob(alices_second.id()).state(), v1::JOB_STATE_QUEUED);
  ::kill(cluster_->coordinator_pid(), SIGHUP);
  EXPECT_EQ(WaitRunning(alices_second.id()).state(), v1::JOB_STATE_RUNNING);

  // The owner moves her waiting job; another user may not.
  CliResult moved = cluster_->CliAs(alice_, {"priority", alices_second.id(), "low"});
  EXPECT_EQ(moved.exit_code, 0) << moved.output;
  EXPECT_THAT(moved.output, HasSubstr("priority low, RUNNING"));
  EXPECT_EQ(cluster_->GetJob(alices_second.id()).spec().priority(), "low");
  CliResult refused_move = cluster_->CliAs(bob_, {"priority", alices_second.id(), "normal"});
  EXPECT_EQ(refused_move.exit_code, 5) << refused_move.output;
  EXPECT_THAT(refused_move.output, HasSubstr("belongs to alice"));

  for (const std::string& id : {alices_first.id(), alices_second.id(), huge.id()}) {
    cluster_->Cli({"cancel", id});
  }

  // Accounting: each user sees their own jobs; an admin sees everyone's.
  CliResult alices = cluster_->CliAs(alice_, {"history", "-o", "json"});
  ASSERT_EQ(alices.exit_code, 0) << alices.output;
  v1::GetHistoryResponse history;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(alices.output, &history).ok())
      << alices.output;
  ASSERT_EQ(history.jobs_size(), 2) << alices.output;
  for (const v1::JobAccount& job : history.jobs()) {
    EXPECT_EQ(job.owner(), "alice");
    EXPECT_EQ(job.state(), v1::JOB_STATE_CANCELLED);
    EXPECT_EQ(job.ranks(), 1);
    EXPECT_GT(job.first_started_unix_ms(), 0);
    EXPECT_GT(job.slot_hours(), 0);
    EXPECT_DOUBLE_EQ(job.slot_hours(), job.running_ms() / 3.6e6);
  }
  CliResult peek = cluster_->CliAs(alice_, {"history", "--user", "bob"});
  EXPECT_EQ(peek.exit_code, 5) << peek.output;
  EXPECT_THAT(peek.output, HasSubstr("bob's jobs"));
  CliResult bobs_jobs = cluster_->Cli({"history", "--user", "bob", "--since", "1d"});
  ASSERT_EQ(bobs_jobs.exit_code, 0) << bobs_jobs.output;
  EXPECT_THAT(bobs_jobs.output, HasSubstr(bobs.id()));
  EXPECT_THAT(bobs_jobs.output, HasSubstr(huge.id()));
  EXPECT_THAT(bobs_jobs.output, ::testing::Not(HasSubstr(alices_first.id())));
  EXPECT_THAT(bobs_jobs.output, HasSubstr("2 jobs: "));
  CliResult before = cluster_->Cli({"history", "--since", "2020-01-01", "--until", "2020-01-02"});
  EXPECT_EQ(before.output, "No jobs in this window.\n");
  CliResult bad = cluster_->Cli({"history", "--since", "last week"});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("--since: 'last week' is neither a date"));
}

}  // namespace
}  // namespace trainctl::testing
