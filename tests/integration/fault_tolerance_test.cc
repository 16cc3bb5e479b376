// Fault tolerance end to end with real processes on loopback: a worker
// killed with SIGKILL, a rank that hangs, a rank that dies halfway through a
// checkpoint, and the coordinator killed mid-job. Each job must end
// SUCCEEDED, restarted from its latest checkpoint where one was needed, with
// every training sample of every epoch used exactly once.

#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "fault_test_util.h"
#include "local_cluster.h"

namespace trainctl::testing {
namespace {

using std::chrono::seconds;
using ::testing::AnyOf;
using ::testing::HasSubstr;

TEST(FaultToleranceTest, KilledWorkerRestartsOnTwoWorkersWithExactlyOnceData) {
  const ScopedTempDir samples_dir("ft-samples"), checkpoints_dir("ft-ckpt");
  const std::string& samples = samples_dir.path();
  const std::string& checkpoints = checkpoints_dir.path();
  std::unique_ptr<LocalCluster> cluster;
  {
    ScopedEnv log("TRAINCTL_SAMPLE_LOG", samples);
    cluster = std::make_unique<LocalCluster>(3, 1, 1);
  }
  // First the undisturbed run, for the accuracy to compare with.
  v1::Job calm = cluster->Submit(Spec(3, checkpoints, "{max_restarts: 0}"));
  calm = WaitUntilFinal(*cluster, calm.id());
  ASSERT_EQ(calm.state(), v1::JOB_STATE_SUCCEEDED) << calm.reason();

  v1::Job job = cluster->Submit(Spec(3, checkpoints,
                                      "{min_workers: 2, max_restarts: 2}"));
  // Kill w3 (rank 2) once a checkpoint exists, mid-epoch.
  v1::Job mid = WaitForCheckpointAndStep(*cluster, job.id(), 25, seconds(300));
  ASSERT_EQ(mid.state(), v1::JOB_STATE_RUNNING);
  ASSERT_LT(mid.latest_train().step(), 2 * kStepsPerEpoch - 20);
  cluster->KillWorker(2);

  v1::Job done = WaitUntilFinal(*cluster, job.id());
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.reason();
  EXPECT_EQ(done.generation(), 2);
  EXPECT_EQ(done.world_size(), 2);
  EXPECT_EQ(done.restarts(), 1);
  ASSERT_EQ(RestartReasons(done).size(), 1u);
  // Two signals race: w3's stream closing, and rank 0's exit when Gloo
  // finds its peer gone (its agent reports it). Whichever the coordinator
  // hears first ends the generation and names the cause; both are one
  // restart (seen once in a clean-clone run, after Connect moved to the
  // callback API).
  EXPECT_THAT(RestartReasons(done)[0],
              AnyOf(HasSubstr("worker w3 running rank 2 was lost"),
                    HasSubstr("exited with code")));
  EXPECT_THAT(RestartReasons(done)[0], HasSubstr("from the checkpoint at step"));
  EXPECT_GT(done.resume_from().step(), 0);
  EXPECT_EQ(done.resume_from().world_size(), 3);
  ExpectExactlyOnce(SamplesByStep(samples, job.id()), 2, kStepsPerEpoch, kBatch,
                    kTrainSamples);
  // Restarts and world size left the last checkpoint in place and cataloged.
  std::vector<v1::Checkpoint> catalog = Catalog(*cluster, job.id());
  ASSERT_FALSE(catalog.empty());
  EXPECT_EQ(catalog.back().step(), 2 * kStepsPerEpoch);
  EXPECT_EQ(catalog.back().world_size(), 2);

  // The same accuracy to within one point: the 3 -> 2 rank split changes
  // only the float summation order.
  std::cout << "accuracy after a restart on 2 ranks " << Accuracy(done)
            << ", undisturbed on 3 ranks " << Accuracy(calm) << std::endl;
  EXPECT_GT(Accuracy(done), 0.7);
  EXPECT_NEAR(Accuracy(done), Accuracy(calm), 0.01);
}

TEST(FaultToleranceTest, HungRankIsNamedAndTheJobRecovers) {
  const ScopedTempDir checkpoints_dir("ft-ckpt");
  const std::string& checkpoints = checkpoints_dir.path();
  std::unique_ptr<LocalCluster> cluster;
  {
    ScopedEnv fault("TRAINCTL_FAULT", "hang:rank=1,step=30");
    cluster = std::make_unique<LocalCluster>(2, 1, 1);
  }
  v1::Job job = cluster->Submit(Spec(2, checkpoints, "{hang_timeout_s: 3}"));
  v1::Job done = WaitUntilFinal(*cluster, job.id());
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.reason();
  EXPECT_EQ(done.restarts(), 1);
  ASSERT_EQ(RestartReasons(done).size(), 1u);
  EXPECT_THAT(RestartReasons(done)[0],
              HasSubstr("rank 1 on worker w2 stuck in compute at step 30"));
  EXPECT_THAT(RestartReasons(done)[0],
              HasSubstr("(rank 0 waits in all-reduce #31 at step 30)"));
  EXPECT_THAT(RestartReasons(done)[0],
              HasSubstr("from the checkpoint at step 20"));
}

// A rank that computes slower than its peer (slow_compute, from step 0) is
// named with its worker in the job's log and in status, and nothing is
// restarted for it.
TEST(FaultToleranceTest, AStragglerIsNamedAndTheJobGoesOn) {
  std::unique_ptr<LocalCluster> cluster;
  {
    ScopedEnv fault("TRAINCTL_FAULT", "slow_compute:rank=1,step=0,ms=40");
    cluster = std::make_unique<LocalCluster>(2, 1, 1);
  }
  // 20 steps, a log window every 8.
  const v1::Job job = cluster->Submit(
      SmallJobSpec(2, 1280, 1, "fault_tolerance: {straggler_steps: 16}\n"));
  const v1::Job done = WaitUntilFinal(*cluster, job.id());
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.reason();
  EXPECT_EQ(done.restarts(), 0);
  const std::string slow_worker = done.ranks(1).worker();
  ASSERT_EQ(done.stragglers_size(), 1);
  EXPECT_EQ(done.stragglers(0).rank(), 1);
  EXPECT_EQ(done.stragglers(0).worker(), slow_worker);
  EXPECT_EQ(done.stragglers(0).phase(), "compute");
  EXPECT_EQ(done.stragglers(0).since_step(), 16);
  std::string log;
  for (const v1::JobEvent& e : cluster->Events(job.id())) {
    if (e.has_log()) log += e.log().text() + "\n";
  }
  EXPECT_THAT(log, HasSubstr("[trainctl] straggler: rank 1 on worker " +
                             slow_worker + " spends"));
  EXPECT_THAT(log, HasSubstr("median compute time per step (16 steps in a row, "
                             "at step 16)"));
  const CliResult status = cluster->Cli({"status", job.id()});
  EXPECT_THAT(status.output, HasSubstr("Straggler:   rank 1 on " + slow_worker));
}

// Written on the training thread, and with checkpoint.async on the
// background writer's while training goes on: either way the rank dies,
// and the job resumes from the checkpoint before.
TEST(FaultToleranceTest, CrashWhileWritingACheckpointKeepsThePreviousOne) {
  const ScopedTempDir checkpoints_dir("ft-ckpt");
  const std::string& checkpoints = checkpoints_dir.path();
  std::unique_ptr<LocalCluster> cluster;
  {
    ScopedEnv fault("TRAINCTL_FAULT", "crash_in_checkpoint:rank=0,step=40");
    cluster = std::make_unique<LocalCluster>(2, 1, 1);
  }
  for (const std::string mode : {"", ", async: true"}) {
    SCOPED_TRACE(mode.empty() ? "sync" : "async");
    v1::Job job =
        cluster->Submit(Spec(2, checkpoints, "{max_restarts: 1}", mode));
    v1::Job done = WaitUntilFinal(*cluster, job.id());
    ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.reason();
    ASSERT_EQ(RestartReasons(done).size(), 1u);
    // Rank 1's all-reduce fails with rank 0 ("reset by peer"), and
    // whichever exit the coordinator hears first ends the generation: the
    // restart names rank 0's, or the job's log corrects it a moment later.
    bool corrected = false;
    for (const v1::JobEvent& e : cluster->Events(job.id())) {
      corrected |= e.has_log() &&
                   absl::StrContains(e.log().text(), "exited with code 4") &&
                   absl::StrContains(e.log().text(), "most likely a symptom");
    }
    EXPECT_TRUE(absl::StrContains(RestartReasons(done)[0], "exited with code 4") ||
                corrected)
        << RestartReasons(done)[0];
    EXPECT_THAT(RestartReasons(done)[0],
                HasSubstr("from the checkpoint at step 20"));
    // The half-written file never became a checkpoint, and its temporary
    // was cleaned up by the next writer.
    int temporaries = 0;
    DIR* d = opendir((checkpoints + "/" + job.id()).c_str());
    while (const dirent* e = d ? readdir(d) : nullptr) {
      temporaries += std::string(e->d_name).find(".tmp-") != std::string::npos;
    }
    if (d) closedir(d);
    EXPECT_EQ(temporaries, 0);
    // Every checkpoint after the restart is cataloged with what it cost,
    // and its metric point says so too.
    std::vector<v1::Checkpoint> catalog = Catalog(*cluster, job.id());
    ASSERT_FALSE(catalog.empty());
    EXPECT_EQ(catalog.back().step(), 2 * kStepsPerEpoch);
    for (const v1::Checkpoint& c : catalog) {
      EXPECT_GT(c.write_ms(), 0) << c.step();
      EXPECT_GT(c.blocked_ms(), 0) << c.step();
    }
    int points = 0;
    for (const v1::JobEvent& e : cluster->Events(job.id())) {
      if (e.metric().kind() != "checkpoint") continue;
      ++points;
      EXPECT_GT(e.metric().values().at("write_ms"), 0);
      EXPECT_GT(e.metric().values().at("blocked_ms"), 0);
    }
    EXPECT_GE(points, static_cast<int>(catalog.size()));
  }
}

TEST(FaultToleranceTest, CoordinatorKilledMidJobReadoptsTheRunningRanks) {
  const ScopedTempDir checkpoints_dir("ft-ckpt");
  const std::string& checkpoints = checkpoints_dir.path();
  LocalCluster cluster(2, 1, 1);
  v1::Job job = cluster.Submit(Spec(2, checkpoints, "{}"));
  v1::Job mid = cluster.WaitForJob(
      job.id(), [](const v1::Job& j) { return j.latest_train().step() >= 20; },
      seconds(300));
  ASSERT_EQ(mid.state(), v1::JOB_STATE_RUNNING);
  cluster.KillCoordinator();
  ASSERT_TRUE(cluster.RestartCoordinator());

  v1::Job done = WaitUntilFinal(cluster, job.id());
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.reason();
  // The ranks trained through the outage: same generation, no restart.
  EXPECT_EQ(done.generation(), 1);
  EXPECT_EQ(done.restarts(), 0);
  // Every train metric point exactly once: none lost with the coordinator
  // (the agent re-sent what it had not kept), none twice.
  std::vector<int64_t> train_steps;
  for (const v1::JobEvent& e : cluster.Events(job.id())) {
    if (e.metric().kind() == "train") train_steps.push_back(e.metric().step());
  }
  std::vector<int64_t> expected;
  for (int64_t s = 5; s <= 2 * kStepsPerEpoch; s += 5) expected.push_back(s);
  EXPECT_EQ(train_steps, expected);
}

}  // namespace
}  // namespace trainctl::testing
