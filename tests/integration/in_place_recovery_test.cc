// In-place recovery end to end (fault_tolerance.in_place) with real
// processes on loopback: a rank that crashes, a worker killed with
// SIGKILL, and a replacement's worker frozen during the state's transfer. The surviving rank processes keep their state and regroup as the
// next generation, with a replacement rank on a free slot (the crashed
// rank's own, or a spare worker's) that gets their state over the
// collective, or on two ranks when no slot is free. They redo only the
// interrupted step: the job reloads no checkpoint, every logged step
// appears once in its metrics, and every sample of every epoch is trained
// exactly once.

#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <vector>

#include "absl/strings/str_cat.h"
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

// Single-slot workers (three, or `workers`) whose ranks log their samples
// into `samples` (if not empty) and run with TRAINCTL_FAULT=`fault` (if
// not empty).
std::unique_ptr<LocalCluster> ThreeWorkers(const std::string& samples,
                                           const std::string& fault, int workers = 3) {
  std::optional<ScopedEnv> log, faults;
  if (!samples.empty()) log.emplace("TRAINCTL_SAMPLE_LOG", samples);
  if (!fault.empty()) faults.emplace("TRAINCTL_FAULT", fault);
  return std::make_unique<LocalCluster>(workers, 1, 1);
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

// What every in-place recovery of a 3-rank job must show: on `world`
// ranks after it (3 with a replacement, 2 without).
void ExpectRecoveredInPlace(LocalCluster& cluster, const v1::Job& done,
                            const std::string& samples, int world) {
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.reason();
  EXPECT_EQ(done.generation(), 2);
  EXPECT_EQ(done.world_size(), world);
  EXPECT_EQ(done.restarts(), 1);
  EXPECT_TRUE(RestartReasons(done).empty()) << RestartReasons(done)[0];
  int regrouped = 0;
  for (const v1::Transition& t : done.transitions()) {
    if (t.from() == v1::JOB_STATE_RUNNING && t.to() == v1::JOB_STATE_RUNNING) {
      ++regrouped;
      EXPECT_THAT(t.reason(), HasSubstr(absl::StrCat("recovered in place: generation 2 "
                                                     "goes on with ", world, " of 3 ranks")));
    }
  }
  EXPECT_EQ(regrouped, 1);
  // No completed optimizer step is repeated or lost: each log step once.
  std::vector<int64_t> want;
  for (int64_t s = 5; s <= 2 * kStepsPerEpoch; s += 5) want.push_back(s);
  EXPECT_EQ(TrainSteps(cluster, done.id()), want);
  // Generation 2 starts at the step generation 1 was in when the rank was
  // lost (that step is redone on the new world), or after it when the survivors
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
  EXPECT_EQ(catalog.back().world_size(), world);
  EXPECT_EQ(catalog.back().generation(), 2);
}

// A job whose rank was lost before step 30, recovered in place (more than
// once, perhaps): every logged step once, every generation after the first
// starting at step 30 (nothing before it trained again), every sample once.
void ExpectWentOnFromStep30(LocalCluster& cluster, const v1::Job& done,
                            const std::string& samples) {
  std::vector<int64_t> want;
  for (int64_t s = 5; s <= 2 * kStepsPerEpoch; s += 5) want.push_back(s);
  EXPECT_EQ(TrainSteps(cluster, done.id()), want);
  for (const auto& [generation, started] : StepsByGeneration(samples, done.id())) {
    if (generation > 1) {
      EXPECT_EQ(*started.begin(), 30) << "generation " << generation;
    }
  }
  ExpectExactlyOnce(SamplesByStep(samples, done.id()), 2, kStepsPerEpoch, kBatch, kTrainSamples);
  EXPECT_GT(Accuracy(done), 0.7);
}

// The crashed rank's slot is free again: a replacement takes it.
TEST(InPlaceRecoveryTest, ACrashedRankIsReplacedInPlace) {
  const ScopedTempDir samples_dir("ip-samples"), checkpoints_dir("ip-ckpt");
  const std::unique_ptr<LocalCluster> cluster =
      ThreeWorkers(samples_dir.path(), "exit:rank=2,step=30");
  const v1::Job job = cluster->Submit(Spec(3, checkpoints_dir.path(), kInPlace));
  const v1::Job done = WaitUntilFinal(*cluster, job.id());
  ExpectRecoveredInPlace(*cluster, done, samples_dir.path(), 3);
  EXPECT_THAT(done.transitions().rbegin()[1].reason(),
              HasSubstr("rank 2 on worker w3 exited with code 3"));
  EXPECT_THAT(done.transitions().rbegin()[1].reason(), HasSubstr("1 new on w3"));
  const std::map<int, std::set<int64_t>> steps =
      StepsByGeneration(samples_dir.path(), job.id());
  EXPECT_EQ(*steps.at(2).begin(), 30);
  bool noted = false, joined = false;
  for (const v1::JobEvent& e : cluster->Events(job.id())) {
    if (e.has_log() && e.log().text().find("training goes on at step") != std::string::npos) {
      std::cout << e.log().text() << std::endl;
      noted |= e.log().text().find("training goes on at step 30") != std::string::npos;
      joined |= e.log().text().find("joined in place as rank 2 of 3 in generation 2: "
                                    "training goes on at step 30") != std::string::npos;
    }
  }
  EXPECT_TRUE(noted) << "the survivors' log says where training went on";
  EXPECT_TRUE(joined) << "so does the replacement's";
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
  ExpectRecoveredInPlace(*cluster, done, samples_dir.path(), 3);
  EXPECT_EQ(*StepsByGeneration(samples_dir.path(), job.id()).at(2).begin(), 40);
  bool step_40_by_generation_2 = false;
  for (const v1::Checkpoint& c : Catalog(*cluster, job.id())) {
    step_40_by_generation_2 |= c.step() == 40 && c.generation() == 2;
  }
  EXPECT_TRUE(step_40_by_generation_2);
}

// Rank 0 reports the job's metrics and writes its checkpoints: when it is
// the one lost, the old rank 1 takes over both (the replacement on w1's
// free slot is the last rank).
TEST(InPlaceRecoveryTest, LosingRankZeroHandsItsDutiesToTheNext) {
  const ScopedTempDir samples_dir("ip-samples"), checkpoints_dir("ip-ckpt");
  const std::unique_ptr<LocalCluster> cluster =
      ThreeWorkers(samples_dir.path(), "exit:rank=0,step=30");
  const ScopedTempDir events_dir("ip-tensorboard");
  const v1::Job job = cluster->Submit(
      Spec(3, checkpoints_dir.path(),
           std::string(kInPlace) + "\ntensorboard: {dir: " + events_dir.path() + "}"));
  const v1::Job done = WaitUntilFinal(*cluster, job.id());
  ExpectRecoveredInPlace(*cluster, done, samples_dir.path(), 3);
  // The old rank 0's event file, and the new rank 0's.
  EXPECT_EQ(FilesIn(events_dir.path() + "/" + job.id()), 2u);
  ASSERT_EQ(done.ranks_size(), 3);
  EXPECT_EQ(done.ranks(0).worker(), "w2");
  EXPECT_EQ(done.ranks(1).worker(), "w3");
  EXPECT_EQ(done.ranks(2).worker(), "w1");
}

// The survivors' state in memory is the state a checkpoint would have
// held: recovering in place at step 40 (with a replacement that got that
// state over the collective) trains on as restarting from the checkpoint
// of step 40 on the same three slots does (the same world-size schedule).
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

// Rank 2 crashes; rank 1 dies too, in its regroup, before the recovered
// generation has formed. Rank 0 still holds the state: the coordinator
// recovers in place again, with new replacements on the two free slots.
TEST(InPlaceRecoveryTest, ARankLostDuringTheRecoveryIsRecoveredAgain) {
  const ScopedTempDir samples_dir("ip-samples"), checkpoints_dir("ip-ckpt");
  const std::unique_ptr<LocalCluster> cluster = ThreeWorkers(
      samples_dir.path(), "exit:rank=2,step=30;exit_in_regroup:rank=1,step=30");
  const v1::Job job = cluster->Submit(
      Spec(3, checkpoints_dir.path(), "{in_place: true, min_workers: 2, max_restarts: 3}"));
  const v1::Job done = WaitUntilFinal(*cluster, job.id());
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.reason();
  EXPECT_TRUE(RestartReasons(done).empty()) << RestartReasons(done)[0];
  EXPECT_EQ(done.world_size(), 3);
  EXPECT_GE(done.generation(), 3);
  int regrouped = 0;
  for (const v1::Transition& t : done.transitions()) {
    if (t.from() == v1::JOB_STATE_RUNNING && t.to() == v1::JOB_STATE_RUNNING) {
      ++regrouped;
      std::cout << t.reason() << std::endl;
    }
  }
  EXPECT_EQ(regrouped, done.generation() - 1);
  ExpectWentOnFromStep30(*cluster, done, samples_dir.path());
  for (const v1::JobEvent& e : cluster->Events(job.id())) {
    if (e.has_log() && (e.log().text().find("goes on at step") != std::string::npos ||
                        e.log().text().find("generation") != std::string::npos)) {
      std::cout << e.time_unix_ms() % 100000 << " " << e.log().text() << std::endl;
    }
  }
}

// Rank 2 crashes at step 30 and its replacement's worker is cut off (its
// processes frozen: no exit, no TCP reset) just before it takes the
// state. The survivor sending the state hears nothing from the group; the
// coordinator finds the worker lost at its lease and regroups the two
// survivors again, and they give up the transfer then, not at the
// collective timeout: no restart from the checkpoint, nothing trained
// twice or skipped.
TEST(InPlaceRecoveryTest, AReplacementCutOffDuringTheStateTransferIsGivenUp) {
  const ScopedTempDir samples_dir("ip-samples"), checkpoints_dir("ip-ckpt");
  ClusterOptions options;
  options.coordinator_flags = {"--lease-ms", "3000", "--heartbeat-ms", "250"};
  std::unique_ptr<LocalCluster> cluster;
  {
    const ScopedEnv log("TRAINCTL_SAMPLE_LOG", samples_dir.path());
    const ScopedEnv faults("TRAINCTL_FAULT",
                           "exit:rank=2,step=30;freeze_before_state:rank=2,step=30,generation=2");
    cluster = std::make_unique<LocalCluster>(3, 1, 1, options);
  }
  const v1::Job job = cluster->Submit(Spec(3, checkpoints_dir.path(), kInPlace));
  const v1::Job done = WaitUntilFinal(*cluster, job.id());
  cluster->KillWorker(2);  // frozen: a SIGTERM would wait for it
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.reason();
  EXPECT_TRUE(RestartReasons(done).empty()) << RestartReasons(done)[0];
  EXPECT_EQ(done.generation(), 3);
  EXPECT_EQ(done.world_size(), 2);
  std::vector<std::string> regroups;
  for (const v1::Transition& t : done.transitions()) {
    if (t.from() == v1::JOB_STATE_RUNNING && t.to() == v1::JOB_STATE_RUNNING) {
      regroups.push_back(t.reason());
    }
  }
  ASSERT_EQ(regroups.size(), 2u);
  EXPECT_THAT(regroups[0], HasSubstr("1 new on w3"));
  EXPECT_THAT(regroups[1], HasSubstr("recovered in place: generation 3 goes on with 2 of 3"));
  ExpectWentOnFromStep30(*cluster, done, samples_dir.path());
  // The sender gave the transfer up when told, not when the group timed out.
  bool given_up = false;
  for (const v1::JobEvent& e : cluster->Events(job.id())) {
    if (!e.has_log()) continue;
    given_up |= e.log().text().find("sending the training state to rank 2: the coordinator "
                                    "recovered generation 2") != std::string::npos;
    if (e.log().text().find("generation") != std::string::npos) {
      std::cout << e.time_unix_ms() % 100000 << " " << e.log().text() << std::endl;
    }
  }
  EXPECT_TRUE(given_up) << "the survivor's log names the abandoned transfer";
}

// An elastic in-place job on 2 of 3 workers: it grows to the free third
// in place at its first checkpoint; a killed worker shrinks it to 2 (no
// spare); the worker comes back and the job grows to 3 again at its next
// checkpoint. Never a restart from the checkpoint, nothing trained twice
// or skipped.
TEST(InPlaceRecoveryTest, ANodeThatComesBackIsGrownBackInPlace) {
  const ScopedTempDir samples_dir("ip-samples"), checkpoints_dir("ip-ckpt");
  const std::unique_ptr<LocalCluster> cluster = ThreeWorkers(samples_dir.path(), "");
  constexpr int kEpochs = 6;  // time for the worker to come back
  std::string spec = Spec(2, checkpoints_dir.path(),
                          "{in_place: true, elastic: true, min_workers: 2, max_workers: 3, "
                          "max_restarts: 2}");
  spec.replace(spec.find("epochs: 2"), 9, "epochs: " + std::to_string(kEpochs));
  const v1::Job job = cluster->Submit(spec);
  const v1::Job grown = cluster->WaitForJob(
      job.id(), [](const v1::Job& j) { return j.world_size() == 3 || j.state() != v1::JOB_STATE_RUNNING; },
      seconds(300));
  ASSERT_EQ(grown.world_size(), 3) << grown.reason();
  const v1::Job mid = WaitForCheckpointAndStep(*cluster, job.id(), 60, seconds(300));
  ASSERT_EQ(mid.state(), v1::JOB_STATE_RUNNING);
  ASSERT_LT(mid.latest_train().step(), kEpochs * kStepsPerEpoch / 2) << "too quick to test";
  std::string killed;
  for (const v1::RankInfo& rank : mid.ranks()) {
    if (rank.rank() == 1) killed = rank.worker();
  }
  cluster->KillWorker(killed.back() - '1');
  const v1::Job shrunk = cluster->WaitForJob(
      job.id(), [&](const v1::Job& j) { return j.generation() > mid.generation(); },
      seconds(300));
  ASSERT_EQ(shrunk.world_size(), 2) << shrunk.reason();
  {
    const ScopedEnv log("TRAINCTL_SAMPLE_LOG", samples_dir.path());
    cluster->StartWorker(killed, 1, 1);
  }
  const v1::Job done = WaitUntilFinal(*cluster, job.id());
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.reason();
  EXPECT_TRUE(RestartReasons(done).empty()) << RestartReasons(done)[0];
  EXPECT_EQ(done.world_size(), 3);
  EXPECT_EQ(done.generation(), 4);
  EXPECT_EQ(done.restarts(), 1);  // the loss; growing is not counted
  std::vector<std::string> changes;
  for (const v1::Transition& t : done.transitions()) {
    if (t.from() == v1::JOB_STATE_RUNNING && t.to() == v1::JOB_STATE_RUNNING) {
      changes.push_back(t.reason());
      std::cout << t.reason() << std::endl;
    }
  }
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_THAT(changes[0], HasSubstr("growing from 2 to 3 ranks in place"));
  EXPECT_THAT(changes[1], HasSubstr("recovered in place: generation 3 goes on with 2 of 3"));
  EXPECT_THAT(changes[2], HasSubstr("growing from 2 to 3 ranks in place"));
  EXPECT_THAT(changes[2], HasSubstr("1 new on " + killed));
  std::vector<int64_t> want;
  for (int64_t s = 5; s <= kEpochs * kStepsPerEpoch; s += 5) want.push_back(s);
  EXPECT_EQ(TrainSteps(*cluster, done.id()), want);
  ExpectExactlyOnce(SamplesByStep(samples_dir.path(), done.id()), kEpochs, kStepsPerEpoch,
                    kBatch, kTrainSamples);
  EXPECT_GT(Accuracy(done), 0.7);
  for (const v1::JobEvent& e : cluster->Events(job.id())) {
    if (e.has_log() && e.log().text().find("goes on at step") != std::string::npos) {
      std::cout << e.log().text() << std::endl;
    }
  }
}

// No free slot anywhere: the job goes on with its two survivors.
TEST(InPlaceRecoveryTest, AKilledWorkerWithNoSpareShrinksToTheSurvivors) {
  const ScopedTempDir samples_dir("ip-samples"), checkpoints_dir("ip-ckpt");
  const std::unique_ptr<LocalCluster> cluster = ThreeWorkers(samples_dir.path(), "");
  const v1::Job job = cluster->Submit(Spec(3, checkpoints_dir.path(), kInPlace));
  const v1::Job mid = WaitForCheckpointAndStep(*cluster, job.id(), 25, seconds(300));
  ASSERT_EQ(mid.state(), v1::JOB_STATE_RUNNING);
  ASSERT_LT(mid.latest_train().step(), 2 * kStepsPerEpoch - 20);
  cluster->KillWorker(2);
  const v1::Job done = WaitUntilFinal(*cluster, job.id());
  ExpectRecoveredInPlace(*cluster, done, samples_dir.path(), 2);
}

// A fourth worker stands by as the job's spare (fault_tolerance.spares): a
// job submitted meanwhile does not take it, the killed worker's rank is
// replaced there, and the job ends with the parameters of a run nobody
// disturbed (same world size throughout, same data on each rank).
TEST(InPlaceRecoveryTest, AKilledWorkersRankIsReplacedOnItsSpare) {
  const ScopedTempDir samples_dir("ip-samples"), checkpoints_dir("ip-ckpt");
  const std::unique_ptr<LocalCluster> cluster =
      ThreeWorkers(samples_dir.path(), "", /*workers=*/4);
  const v1::Job undisturbed = WaitUntilFinal(
      *cluster, cluster->Submit(Spec(3, checkpoints_dir.path(), kInPlace)).id());
  ASSERT_EQ(undisturbed.state(), v1::JOB_STATE_SUCCEEDED) << undisturbed.reason();
  const v1::Job job = cluster->Submit(Spec(
      3, checkpoints_dir.path(), "{in_place: true, min_workers: 2, max_restarts: 2, spares: 1}"));
  const v1::Job mid = WaitForCheckpointAndStep(*cluster, job.id(), 25, seconds(300));
  ASSERT_EQ(mid.state(), v1::JOB_STATE_RUNNING);
  ASSERT_LT(mid.latest_train().step(), 2 * kStepsPerEpoch - 20);
  ASSERT_EQ(mid.spare_workers_size(), 1);
  const std::string spare = mid.spare_workers(0);
  const v1::Job other = cluster->Submit(Spec(1, checkpoints_dir.path(), "{max_restarts: 0}"));
  EXPECT_EQ(cluster->GetJob(other.id()).state(), v1::JOB_STATE_QUEUED);
  EXPECT_THAT(cluster->Cli({"status", job.id()}).output, HasSubstr("1 of 1 held (" + spare + ")"));
  EXPECT_THAT(cluster->Cli({"workers"}).output, HasSubstr("spare:" + job.id()));
  std::string killed;
  for (const v1::RankInfo& rank : mid.ranks()) {
    if (rank.rank() == 1) killed = rank.worker();
  }
  cluster->KillWorker(killed.back() - '1');
  const v1::Job done = WaitUntilFinal(*cluster, job.id());
  ExpectRecoveredInPlace(*cluster, done, samples_dir.path(), 3);
  std::set<std::string> workers;
  for (const v1::RankInfo& rank : done.ranks()) workers.insert(rank.worker());
  EXPECT_EQ(workers.size(), 3u);
  EXPECT_EQ(workers.count(killed), 0u);
  EXPECT_EQ(workers.count(spare), 1u);
  // The queued job starts once the job ends; it is not needed further.
  EXPECT_EQ(cluster->Cli({"cancel", other.id()}).exit_code, 0);
  // Every logged loss as in the undisturbed run, to float tolerance.
  const std::map<int64_t, double> mine = TrainLosses(*cluster, job.id());
  const std::map<int64_t, double> want = TrainLosses(*cluster, undisturbed.id());
  ASSERT_EQ(mine.size(), want.size());
  double worst = 0;
  for (const auto& [step, loss] : want) {
    ASSERT_TRUE(mine.count(step)) << step;
    EXPECT_NEAR(mine.at(step), loss, 1e-6 * loss) << "step " << step;
    worst = std::max(worst, std::abs(mine.at(step) - loss) / loss);
  }
  std::cout << "largest relative loss difference to the undisturbed run: " << worst
            << "; accuracy " << Accuracy(done) << " vs " << Accuracy(undisturbed) << std::endl;
  EXPECT_NEAR(Accuracy(done), Accuracy(undisturbed), 0.005);
}

}  // namespace
}  // namespace trainctl::testing
