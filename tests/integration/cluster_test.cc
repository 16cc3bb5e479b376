// End to end: a coordinator and two workers as real processes on loopback,
// driven through the trainctl CLI and the Jobs API.

#include <signal.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "local_cluster.h"

namespace trainctl::testing {
namespace {

using ::testing::HasSubstr;
using std::chrono::seconds;

// Whether `pid` is a live rank process (a zombie, or a reused pid running
// something else, is not).
bool IsRankProcess(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  std::string cmdline((std::istreambuf_iterator<char>(in)),
                      std::istreambuf_iterator<char>());
  return cmdline.find("trainctl-worker") != std::string::npos &&
         cmdline.find("rank") != std::string::npos;
}

class ClusterTest : public SharedClusterTest {};

TEST_F(ClusterTest, TwoRankJobSucceedsWithFallingLoss) {
  const std::string spec =
      cluster_->WriteFile("small.yaml", SmallJobSpec(2, 4096, 2));
  CliResult submit = cluster_->Cli({"submit", spec, "--follow"});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const std::string id = JobIdFrom(submit.output);
  ASSERT_FALSE(id.empty()) << submit.output;
  EXPECT_THAT(submit.output, HasSubstr("SUCCEEDED"));

  v1::Job job = cluster_->GetJob(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.reason();
  EXPECT_EQ(job.total_steps(), 128);  // 2 epochs x 4096 / 64
  ASSERT_EQ(job.ranks_size(), 2);
  EXPECT_NE(job.ranks(0).worker(), job.ranks(1).worker());
  EXPECT_GT(job.latest_eval().values().at("eval_accuracy"), 0.6);

  std::vector<double> losses;
  bool saw_rank1_log = false;
  int64_t expected_seq = 1;
  for (const v1::JobEvent& e : cluster_->Events(id)) {
    EXPECT_EQ(e.seq(), expected_seq++);
    if (e.has_metric() && e.metric().kind() == "train") {
      losses.push_back(e.metric().values().at("loss"));
    }
    if (e.has_log() && e.log().rank() == 1) saw_rank1_log = true;
  }
  ASSERT_EQ(losses.size(), 16u);  // every 8 of 128 steps
  EXPECT_LT((losses[14] + losses[15]) / 2, (losses[0] + losses[1]) / 2 * 0.7);
  EXPECT_TRUE(saw_rank1_log);

  CliResult status = cluster_->Cli({"status", id});
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_THAT(status.output, HasSubstr("SUCCEEDED"));
  CliResult list = cluster_->Cli({"list"});
  EXPECT_EQ(list.exit_code, 0) << list.output;
  EXPECT_THAT(list.output, HasSubstr(id));
}

TEST_F(ClusterTest, CancelEndsJobAndLeavesNoRankRunning) {
  const std::string spec =
      cluster_->WriteFile("long.yaml", SmallJobSpec(2, 60000, 100));
  CliResult submit = cluster_->Cli({"submit", spec});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const std::string id = JobIdFrom(submit.output);
  v1::Job job = cluster_->WaitForJob(
      id, [](const v1::Job& j) { return j.latest_train().step() > 0; },
      seconds(90));
  ASSERT_GT(job.latest_train().step(), 0) << job.DebugString();
  std::vector<pid_t> pids;
  for (const auto& rank : job.ranks()) {
    ASSERT_GT(rank.pid(), 0) << job.DebugString();
    pids.push_back(rank.pid());
  }
  auto alive = [&pids] {
    int n = 0;
    for (pid_t pid : pids) n += IsRankProcess(pid);
    return n;
  };
  ASSERT_EQ(alive(), 2);

  CliResult cancel = cluster_->Cli({"cancel", id});
  EXPECT_EQ(cancel.exit_code, 0) << cancel.output;
  job = cluster_->GetJob(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_THAT(job.reason(), HasSubstr("cancelled by user"));

  // Both rank processes are gone (their agents reaped them) and their slots
  // are free again.
  const auto deadline = std::chrono::steady_clock::now() + seconds(30);
  while (alive() > 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(alive(), 0);
  ASSERT_TRUE(cluster_->WaitForWorkers(2, seconds(5)));
  const auto slots_deadline = std::chrono::steady_clock::now() + seconds(30);
  int free_slots = 0;
  while (std::chrono::steady_clock::now() < slots_deadline) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + seconds(5));
    v1::ListWorkersResponse resp;
    ASSERT_TRUE(cluster_->jobs().ListWorkers(&ctx, {}, &resp).ok());
    free_slots = 0;
    for (const auto& w : resp.workers()) free_slots += w.slots_free();
    if (free_slots == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(free_slots, 2);
}

TEST_F(ClusterTest, InvalidSpecIsRejectedNamingTheField) {
  const std::string spec = cluster_->WriteFile(
      "bad.yaml", SmallJobSpec(2, 100, 1, "") + "optimizer_typo: 1\n");
  CliResult submit = cluster_->Cli({"submit", spec});
  EXPECT_EQ(submit.exit_code, 2) << submit.output;
  EXPECT_THAT(submit.output, HasSubstr("optimizer_typo: unknown field"));

  const std::string unknown_model = cluster_->WriteFile(
      "resnet.yaml", "model: resnet\ndata: {train_images: a, train_labels: b}\n");
  submit = cluster_->Cli({"submit", unknown_model});
  EXPECT_EQ(submit.exit_code, 2) << submit.output;
  EXPECT_THAT(submit.output, HasSubstr("model.type: unknown model 'resnet'"));

  submit = cluster_->Cli({"submit", cluster_->dir() + "/no-such.yaml"});
  EXPECT_NE(submit.exit_code, 0);
  EXPECT_THAT(submit.output, HasSubstr("no-such.yaml"));
}

TEST_F(ClusterTest, JobNeedingMoreSlotsStaysQueuedAndSaysWhy) {
  const std::string spec =
      cluster_->WriteFile("wide.yaml", SmallJobSpec(4, 1024, 1));
  CliResult submit = cluster_->Cli({"submit", spec});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const std::string id = JobIdFrom(submit.output);
  v1::Job job = cluster_->GetJob(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_QUEUED);
  CliResult status = cluster_->Cli({"status", id});
  EXPECT_THAT(status.output,
              HasSubstr("needs 4 slots and the cluster has 2 in all"));
  EXPECT_EQ(cluster_->Cli({"cancel", id}).exit_code, 0);
  EXPECT_EQ(cluster_->GetJob(id).state(), v1::JOB_STATE_CANCELLED);
}

TEST_F(ClusterTest, MissingDataFileFailsJobWithClearReason) {
  const std::string spec = cluster_->WriteFile(
      "missing.yaml",
      "ranks: 2\nmodel: mlp\ndata: {train_images: /nonexistent/images.gz, "
      "train_labels: /nonexistent/labels.gz}\n");
  CliResult submit = cluster_->Cli({"submit", spec, "--follow"});
  EXPECT_EQ(submit.exit_code, 1) << submit.output;
  const std::string id = JobIdFrom(submit.output);
  v1::Job job = cluster_->GetJob(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(job.reason(),
              HasSubstr("data.train_images: /nonexistent/images.gz: cannot "
                        "open: No such file or directory"));
  // The cluster keeps serving: the failed job released its slots.
  EXPECT_TRUE(cluster_->WaitForWorkers(2, seconds(5)));
}

// Only rank 0 writes checkpoints, so only it meets a checkpoint directory
// it cannot create; its peer then crashes, its collective broken. Rank 0
// used to close its group first and was still tearing down when the
// peer's crash arrived: it was stopped (-15), and the job restarted 3
// times blaming "connection closed by peer". A failing rank now exits at
// once (rank_main.cc): the cause is heard first and fails the job.
TEST_F(ClusterTest, AConfigurationErrorOnOneRankFailsTheJobNotItsPeersCrash) {
  const std::string spec = cluster_->WriteFile(
      "unwritable.yaml",
      SmallJobSpec(2, 4096, 1,
                   "fault_tolerance: {max_restarts: 3}\n"
                   "checkpoint: {dir: /proc/trainctl-not-here/ckpt, "
                   "every_steps: 20}\n"));
  CliResult submit = cluster_->Cli({"submit", spec, "--follow"});
  EXPECT_EQ(submit.exit_code, 1) << submit.output;
  const std::string id = JobIdFrom(submit.output);
  ASSERT_FALSE(id.empty()) << submit.output;
  v1::Job job = cluster_->GetJob(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(job.restarts(), 0) << job.reason();
  EXPECT_THAT(job.reason(), HasSubstr("rank 0"));
  EXPECT_THAT(job.reason(), HasSubstr("checkpoint.dir"));
  EXPECT_THAT(job.reason(), HasSubstr("not retried"));
  EXPECT_TRUE(cluster_->WaitForWorkers(2, seconds(30)));
}

TEST(CliTest, UnreachableCoordinatorSaysWhereItLooked) {
  std::vector<std::string> argv{std::string(TRAINCTL_BIN_DIR) + "/trainctl",
                                "--coordinator", "127.0.0.1:1", "list"};
  const ScopedTempDir temp("trainctl-cli");
  const std::string& dir = temp.path();
  Process cli(argv, dir + "/out");
  EXPECT_EQ(cli.Wait(seconds(60)), 3);
  std::ifstream in(dir + "/out");
  std::string output((std::istreambuf_iterator<char>(in)),
                     std::istreambuf_iterator<char>());
  EXPECT_THAT(output, HasSubstr("127.0.0.1:1"));
}

}  // namespace
}  // namespace trainctl::testing
