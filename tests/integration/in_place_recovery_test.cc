// In-place recovery end to end (fault_tolerance.in_place) with real
// processes on loopback: a rank that crashes and a worker killed with
// SIGKILL. The surviving rank processes keep their state, regroup as the
// next generation on two ranks, and redo only the interrupted step: the
// job reloads no checkpoint, every logged step appears once in its
// metrics, and every sample of every epoch is trained exactly once.

#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "fault_test_util.h"
#include "local_cluster.h"

namespace trainctl::testing {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

constexpr char kInPlace[] = "{in_place: true, min_workers: 2, max_restarts: 2}";

// The steps each generation's ranks started (from their sample logs).
std::map<int, std::set<int64_t>> StepsByGeneration(const std::string& dir,
                                                   const std::string& job) {
  std::map<int, std::set<int64_t>> out;
  for (const SampleLog& log : ReadSampleLogs(dir, job)) {
    for (const auto& [step, ids] : log.ids_by_step) out[log.generation].insert(step);
  }
  return out;
}

// Three single-slot workers whose ranks log their samples into
// `samples` (if not empty) and run with TRAINCTL_FAULT=`fault` (if not empty).
std::unique_ptr<LocalCluster> ThreeWorkers(const std::string& samples,
                                           const std::string& fault) {
  std::optional<ScopedEnv> log, faults;
  if (!samples.empty()) log.emplace("TRAINCTL_SAMPLE_LOG", samples);
  if (!fault.empty()) faults.emplace("TRAINCTL_FAULT", fault);
  return std::make_unique<LocalCluster>(3, 1, 1);
}

size_t FilesIn(const std::string& dir) {
  size_t n = 0;
  DIR* d = opendir(dir.c_str());
  while (const dirent* e = d ? readdir(d) : nullptr) n += e->d_type == DT_REG;
  if (d) closedir(d);
  return n;
}

// The steps of the job's train metric points, in the order they came.
std::vector<int64_t> TrainSteps(LocalCluster& cluster, const std::string& id) {
  std::vector<int64_t> steps;
  for (const v1::JobEvent& e : cluster.Events(id)) {
    if (e.has_metric() && e.metric().kind() == "train") steps.push_back(e.metric().step());
  }
  return steps;
}

// The job's train loss at each logged step.
std::map<int64_t, double> TrainLosses(LocalCluster& cluster, const std::string& id) {
  std::map<int64_t, double> losses;
  for (const v1::JobEvent& e : cluster.Events(id)) {
    if (e.has_metric() && e.metric().kind() == "train") {
      losses[e.metric().step()] = e.metric().values().at("loss");
    }
  }
  return losses;
}

// What every in-place recovery of a 3-rank job to 2 ranks must show.
void ExpectRecoveredInPlace(LocalCluster& cluster, const v1::Job& done,
                            const std::string& samples) {
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.reason();
  EXPECT_EQ(done.generation(), 2);
  EXPECT_EQ(done.world_size(), 2);
  EXPECT_EQ(done.restarts(), 1);
  EXPECT_TRUE(RestartReasons(done).empty()) << RestartReasons(done)[0];
  int regrouped = 0;
  for (const v1::Transition& t : done.transitions()) {
    if (t.from() == v1::JOB_STATE_RUNNING && t.to() == v1::JOB_STATE_RUNNING) {
      ++regrouped;
      EXPECT_THAT(t.reason(), HasSubstr("recovered in place: generation 2 goes on with "
                                        "2 of 3 ranks"));
    }
  }
  EXPECT_EQ(regrouped, 1);
  // No completed optimizer step is repeated or lost: each log step once.
  std::vector<int64_t> want;
  for (int64_t s = 5; s <= 2 * kStepsPerEpoch; s += 5) want.push_back(s);
  EXPECT_EQ(TrainSteps(cluster, done.id()), want);
  // Generation 2 starts at the step generation 1 was in when the rank was
  // lost (that step is redone on two ranks), or after it when the survivors
  // had finished its update; not at a checkpoint.
  const std::map<int, std::set<int64_t>> steps = StepsByGeneration(samples, done.id());
  ASSERT_EQ(steps.size(), 2u);
  const int64_t last = *steps.at(1).rbegin();
  EXPECT_GE(*steps.at(2).begin(), last);
  EXPECT_LE(*steps.at(2).begin(), last + 1);
  EXPECT_EQ(*steps.at(2).rbegin(), 2 * kStepsPerEpoch - 1);
  ExpectExactlyOnce(SamplesByStep(samples, done.id()), 2, kStepsPerEpoch, kBatch,
                    kTrainSamples);
  EXPECT_GT(Accuracy(done), 0.7);
  // The recovered generation's rank 0 wrote the last checkpoint.
  const std::vector<v1::Checkpoint> catalog = Catalog(cluster, done.id());
  ASSERT_FALSE(catalog.empty());
  EXPECT_EQ(catalog.back().step(), 2 * kStepsPerEpoch);
  EXPECT_EQ(catalog.back().world_size(), 2);
  EXPECT_EQ(catalog.back().generation(), 2);
}

TEST(InPlaceRecoveryTest, ACrashedRankIsRecoveredInPlaceOnTheSurvivors) {
  const ScopedTempDir samples_dir("ip-samples"), checkpoints_dir("ip-ckpt");
  const std::unique_ptr<LocalCluster> cluster =
      ThreeWorkers(samples_dir.path(), "exit:rank=2,step=30");
  const v1::Job job = cluster->Submit(Spec(3, checkpoints_dir.path(), kInPlace));
  const v1::Job done = WaitUntilFinal(*cluster, job.id());
  ExpectRecoveredInPlace(*cluster, done, samples_dir.path());
  EXPECT_THAT(done.transitions().rbegin()[1].reason(),
              HasSubstr("rank 2 on worker w3 exited with code 3"));
  const std::map<int, std::set<int64_t>> steps =
      StepsByGeneration(samples_dir.path(), job.id());
  EXPECT_EQ(*steps.at(2).begin(), 30);
  bool noted = false;
  for (const v1::JobEvent& e : cluster->Events(job.id())) {
    if (e.has_log() && e.log().text().find("training goes on at step") != std::string::npos) {
      std::cout << e.log().text() << std::endl;
      noted |= e.log().text().find("training goes on at step 30") != std::string::npos;
    }
  }
  EXPECT_TRUE(noted) << "the survivors' log says where training went on";
}

// A rank lost after the step's update but before its end: the survivors
// have finished step 40's update, not its train point (their gather with the
// lost rank failed), its checkpoint or anything after. They go on at step 40
// and do its end first: the point is reported once and the checkpoint of
// step 40 is written by the new generation.
TEST(InPlaceRecoveryTest, AStepsEndThatNoSurvivorFinishedIsDoneAfterTheRegroup) {
  const ScopedTempDir samples_dir("ip-samples"), checkpoints_dir("ip-ckpt");
  const std::unique_ptr<LocalCluster> cluster =
      ThreeWorkers(samples_dir.path(), "exit_after_update:rank=2,step=39");
  const v1::Job job = cluster->Submit(
      Spec(3, checkpoints_dir.path(), kInPlace));
  const v1::Job done = WaitUntilFinal(*cluster, job.id());
  ExpectRecoveredInPlace(*cluster, done, samples_dir.path());
  EXPECT_EQ(*StepsByGeneration(samples_dir.path(), job.id()).at(2).begin(), 40);
  bool step_40_by_generation_2 = false;
  for (const v1::Checkpoint& c : Catalog(*cluster, job.id())) {
    step_40_by_generation_2 |= c.step() == 40 && c.generation() == 2;
  }
  EXPECT_TRUE(step_40_by_generation_2);
}

// Rank 0 reports the job's metrics and writes its checkpoints: when it is
// the one lost, the old rank 1 takes over both.
TEST(InPlaceRecoveryTest, LosingRankZeroHandsItsDutiesToTheNext) {
  const ScopedTempDir samples_dir("ip-samples"), checkpoints_dir("ip-ckpt");
  const std::unique_ptr<LocalCluster> cluster =
      ThreeWorkers(samples_dir.path(), "exit:rank=0,step=30");
  const ScopedTempDir events_dir("ip-tensorboard");
  const v1::Job job = cluster->Submit(
      Spec(3, checkpoints_dir.path(),
           std::string(kInPlace) + "\ntensorboard: {dir: " + events_dir.path() + "}"));
  const v1::Job done = WaitUntilFinal(*cluster, job.id());
  ExpectRecoveredInPlace(*cluster, done, samples_dir.path());
  // The old rank 0's event file, and the new rank 0's.
  EXPECT_EQ(FilesIn(events_dir.path() + "/" + job.id()), 2u);
  ASSERT_EQ(done.ranks_size(), 2);
  EXPECT_EQ(done.ranks(0).worker(), "w2");
  EXPECT_EQ(done.ranks(1).worker(), "w3");
}

// The survivors' state in memory is the state a checkpoint would have
// held: recovering in place at step 40 trains on as restarting from the
// checkpoint of step 40 on the same two ranks does (the same world-size
// schedule).
TEST(InPlaceRecoveryTest, EndsWithTheModelOfARestartFromTheSameStep) {
  const ScopedTempDir checkpoints_dir("ip-ckpt");
  // Rank 0's checkpoint of step 40 is cataloged before the exit, so the
  // restart resumes there.
  const std::unique_ptr<LocalCluster> cluster =
      ThreeWorkers("", "exit:rank=2,step=40,ms=1000");
  const v1::Job in_place = WaitUntilFinal(
      *cluster, cluster->Submit(Spec(3, checkpoints_dir.path(), kInPlace)).id());
  const v1::Job restarted = WaitUntilFinal(
      *cluster, cluster->Submit(Spec(3, checkpoints_dir.path(),
                                     "{min_workers: 2, max_restarts: 2}")).id());
  ASSERT_EQ(in_place.state(), v1::JOB_STATE_SUCCEEDED) << in_place.reason();
  ASSERT_EQ(restarted.state(), v1::JOB_STATE_SUCCEEDED) << restarted.reason();
  ASSERT_EQ(RestartReasons(restarted).size(), 1u);
  EXPECT_THAT(RestartReasons(restarted)[0], HasSubstr("from the checkpoint at step 40"));
  EXPECT_TRUE(RestartReasons(in_place).empty());
  // The steps right after the loss train the same model on the same data:
  // the same losses. (Later on, float noise that grows over hundreds of
  // steps separates even two runs of one job, so the end is compared as
  // fault_tolerance_test compares it.)
  const std::map<int64_t, double> mine = TrainLosses(*cluster, in_place.id());
  const std::map<int64_t, double> want = TrainLosses(*cluster, restarted.id());
  for (int64_t step = 45; step <= 70; step += 5) {
    ASSERT_TRUE(mine.count(step) && want.count(step)) << step;
    EXPECT_NEAR(mine.at(step), want.at(step), 1e-5 * want.at(step)) << "step " << step;
  }
  std::cout << "accuracy in place " << Accuracy(in_place) << ", after a restart from "
            << "the same step " << Accuracy(restarted) << std::endl;
  EXPECT_NEAR(Accuracy(in_place), Accuracy(restarted), 0.01);
}

TEST(InPlaceRecoveryTest, AKilledWorkerIsRecoveredInPlaceOnTheSurvivors) {
  const ScopedTempDir samples_dir("ip-samples"), checkpoints_dir("ip-ckpt");
  const std::unique_ptr<LocalCluster> cluster = ThreeWorkers(samples_dir.path(), "");
  const v1::Job job = cluster->Submit(Spec(3, checkpoints_dir.path(), kInPlace));
  const v1::Job mid = WaitForCheckpointAndStep(*cluster, job.id(), 25, seconds(300));
  ASSERT_EQ(mid.state(), v1::JOB_STATE_RUNNING);
  ASSERT_LT(mid.latest_train().step(), 2 * kStepsPerEpoch - 20);
  cluster->KillWorker(2);
  const v1::Job done = WaitUntilFinal(*cluster, job.id());
  ExpectRecoveredInPlace(*cluster, done, samples_dir.path());
}

}  // namespace
}  // namespace trainctl::testing
