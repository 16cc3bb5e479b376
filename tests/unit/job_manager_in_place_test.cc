// JobManager's in-place recovery, driven with fakes: a lost rank's
// survivors become the next generation without a restart from the
// checkpoint, renumbered in their old order, on a world size that divides
// the batch; and the cases that still restart as before.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/job_manager_faults_fixture.h"

namespace trainctl::coordinator {
namespace {

using ::testing::HasSubstr;

TEST(InPlaceWorldSizeTest, TheMostSurvivorsThatDivideTheBatch) {
  EXPECT_EQ(InPlaceWorldSize(3, 2, 96), 3);
  EXPECT_EQ(InPlaceWorldSize(3, 2, 16), 2);  // 16 does not split over 3
  EXPECT_EQ(InPlaceWorldSize(1, 1, 7), 1);
  EXPECT_EQ(InPlaceWorldSize(2, 0, 5), 1);   // min_workers 0 counts as 1
  EXPECT_EQ(InPlaceWorldSize(3, 3, 16), 0);  // none: restart instead
  EXPECT_EQ(InPlaceWorldSize(0, 1, 16), 0);
}

class InPlaceTest : public JobManagerFaultsTest {
 protected:
  // A job of `ranks` ranks (one per worker w1..wN), every rank running,
  // in its group and past its start.
  v1::Job StartTraining(int ranks, int batch, const std::string& fault_tolerance,
                        const std::string& phase = "compute") {
    for (int w = 1; w <= ranks; ++w) links_.push_back(AddWorker("w" + std::to_string(w), 1));
    v1::Job job = *jobs_.Submit(
        FaultSpec(ranks, batch, "fault_tolerance: " + fault_tolerance + "\n"), false);
    std::vector<std::string> workers;
    for (int r = 0; r < ranks; ++r) workers.push_back(Worker(r));
    RunRanks(job.id(), workers, {{1, phase}});
    Checkpoint("w1", job.id(), 1, 10);
    return job;
  }
  static std::string Worker(int rank) { return "w" + std::to_string(rank + 1); }
  // The regroup messages the worker of old rank `rank` got.
  std::vector<v1::RegroupRanks> Regroups(int rank) {
    std::vector<v1::RegroupRanks> out;
    for (const auto& m : links_[rank]->sent) {
      if (m.has_regroup()) out.push_back(m.regroup());
    }
    return out;
  }
  std::vector<std::shared_ptr<FakeAgentLink>> links_;
};

// The crashed rank's slot is free again: a replacement takes it, and the
// job keeps its world size.
TEST_F(InPlaceTest, ARankExitIsReplacedOnTheSlotItFreed) {
  const v1::Job job =
      StartTraining(3, 24, "{in_place: true, min_workers: 2, max_restarts: 2}");
  Exit("w3", job.id(), 2, 3, "fault hook: exiting before step 30");
  const v1::Job after = *jobs_.Get(job.id());
  EXPECT_EQ(after.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(after.generation(), 2);
  EXPECT_EQ(after.world_size(), 3);
  EXPECT_EQ(after.restarts(), 1);
  ASSERT_EQ(after.ranks_size(), 3);
  EXPECT_EQ(after.ranks(0).worker(), "w1");
  EXPECT_EQ(after.ranks(1).worker(), "w2");
  EXPECT_EQ(after.ranks(1).state(), v1::RANK_STATE_RUNNING);
  EXPECT_EQ(after.ranks(2).worker(), "w3");
  EXPECT_EQ(after.ranks(2).state(), v1::RANK_STATE_ASSIGNED);
  EXPECT_THAT(after.reason(),
              HasSubstr("rank 2 on worker w3 exited with code 3: fault hook"));
  EXPECT_THAT(after.reason(),
              HasSubstr("; recovered in place: generation 2 goes on with 3 of 3 ranks: 2 "
                        "from their state in memory, 1 new on w3 that receives it over "
                        "the collective (recovery 1 of 2)"));
  const v1::Transition& last = *after.transitions().rbegin();
  EXPECT_EQ(last.from(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(last.to(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(last.slots(), 3);
  // Each survivor's agent renumbers its rank; nothing is cancelled.
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(Regroups(r).size(), 1u) << r;
    const v1::RegroupRanks regroup = Regroups(r)[0];
    EXPECT_EQ(regroup.from_generation(), 1);
    EXPECT_EQ(regroup.generation(), 2);
    EXPECT_EQ(regroup.world_size(), 3);
    ASSERT_EQ(regroup.moves_size(), 1);
    EXPECT_EQ(regroup.moves(0).from_rank(), r);
    EXPECT_EQ(regroup.moves(0).rank(), r);
    EXPECT_EQ(links_[r]->Cancels(), 0);
  }
  // The replacement is started to join them: no checkpoint to load.
  const std::vector<v1::RankAssignment> started = links_[2]->Assignments();
  ASSERT_EQ(started.size(), 2u);  // generation 1's rank 2, then the replacement
  EXPECT_TRUE(started[1].joins_in_place());
  EXPECT_FALSE(started[0].joins_in_place());
  EXPECT_EQ(started[1].generation(), 2);
  EXPECT_EQ(started[1].rank(), 2);
  EXPECT_EQ(started[1].world_size(), 3);
  EXPECT_EQ(started[1].local_rank(), 0);
  EXPECT_EQ(started[1].local_world_size(), 1);
  EXPECT_TRUE(started[1].resume().path().empty());
  EXPECT_EQ(started[1].spec().name(), "ft");
  // The survivors learn their place from the rendezvous; the lost one has none.
  absl::StatusOr<Rendezvous::RegroupPlace> place =
      rendezvous_.AwaitRegroup({job.id(), 1}, 1, 0);
  ASSERT_TRUE(place.ok()) << place.status();
  EXPECT_EQ(place->generation, 2);
  EXPECT_EQ(place->rank, 1);
  EXPECT_EQ(place->world_size, 3);
  EXPECT_EQ(rendezvous_.AwaitRegroup({job.id(), 1}, 2, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // The old generation's scope is closed; the new one is open.
  EXPECT_FALSE(rendezvous_.Set({job.id(), 1}, "k", "v").ok());
  EXPECT_TRUE(rendezvous_.Set({job.id(), 2}, "k", "v").ok());
  // The ranks finish under their new identity.
  Exit("w3", job.id(), 2, 0, "", 2);
  Exit("w2", job.id(), 1, 0, "", 2);
  Exit("w1", job.id(), 0, 0, "", 2);
  EXPECT_EQ(jobs_.Get(job.id())->state(), v1::JOB_STATE_SUCCEEDED);
}

// Lost while the recovered generation formed (before it logged a step):
// the survivor still holds its state and goes on to the next generation;
// the replacement held none yet, so it is stopped and replaced afresh.
TEST_F(InPlaceTest, ALossWhileTheRecoveredGenerationFormsRecoversAgain) {
  const v1::Job job =
      StartTraining(3, 24, "{in_place: true, min_workers: 2, max_restarts: 3}");
  Exit("w3", job.id(), 2, 3);
  ASSERT_EQ(jobs_.Get(job.id())->generation(), 2);
  Exit("w2", job.id(), 1, 3, "fault hook: exiting in the regroup", 2);
  const v1::Job after = *jobs_.Get(job.id());
  EXPECT_EQ(after.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(after.generation(), 3);
  EXPECT_EQ(after.world_size(), 3);
  EXPECT_EQ(after.restarts(), 2);
  ASSERT_EQ(after.ranks_size(), 3);
  EXPECT_EQ(after.ranks(0).worker(), "w1");
  EXPECT_THAT(after.reason(), HasSubstr("generation 3 goes on with 3 of 3 ranks: 1 from "
                                        "their state in memory, 2 new on w2, w3"));
  // The old replacement's generation is cancelled before the new one is
  // assigned to the same worker.
  int cancelled_at = -1, assigned_at = -1;
  for (size_t i = 0; i < links_[2]->sent.size(); ++i) {
    const v1::CoordinatorMessage& m = links_[2]->sent[i];
    if (m.has_cancel() && m.cancel().generation() == 2) cancelled_at = static_cast<int>(i);
    if (m.has_assign() && m.assign().ranks(0).generation() == 3) {
      assigned_at = static_cast<int>(i);
      EXPECT_TRUE(m.assign().ranks(0).joins_in_place());
    }
  }
  EXPECT_GE(cancelled_at, 0);
  EXPECT_GT(assigned_at, cancelled_at);
  // The survivor, whose group for generation 2 never formed, asks again.
  absl::StatusOr<Rendezvous::RegroupPlace> place =
      rendezvous_.AwaitRegroup({job.id(), 2}, 0, 0);
  ASSERT_TRUE(place.ok()) << place.status();
  EXPECT_EQ(place->generation, 3);
  EXPECT_EQ(place->rank, 0);
  EXPECT_EQ(place->world_size, 3);
  for (const v1::WorkerInfo& w : jobs_.Workers()) EXPECT_EQ(w.slots_free(), 0) << w.name();
}

// An elastic in-place job grows on a free slot without a restart: its
// ranks keep their numbers and leave their group at the next step
// boundary (the agents ask them to), the newcomer receives their state.
TEST_F(InPlaceTest, AnElasticJobGrowsInPlaceAtAStepBoundary) {
  const v1::Job job = StartTraining(
      2, 24, "{in_place: true, elastic: true, min_workers: 2, max_workers: 3}");
  v1::RankMetrics m;
  m.set_job_id(job.id());
  m.set_generation(1);
  m.set_seq(1);
  m.mutable_point()->set_kind("train");
  m.mutable_point()->set_step(15);
  (*m.mutable_point()->mutable_values())["loss"] = 0.5;
  ASSERT_TRUE(jobs_.OnRankMetrics("w1", m).ok());
  links_.push_back(AddWorker("w3", 1));
  Checkpoint("w1", job.id(), 1, 20);
  const v1::Job after = *jobs_.Get(job.id());
  EXPECT_EQ(after.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(after.generation(), 2);
  EXPECT_EQ(after.world_size(), 3);
  EXPECT_EQ(after.restarts(), 0);  // growing is not a failure
  EXPECT_THAT(after.reason(), HasSubstr("growing from 2 to 3 ranks in place (elastic): "
                                        "1 new on w3"));
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(Regroups(r).size(), 1u) << r;
    EXPECT_TRUE(Regroups(r)[0].at_step_boundary());
    EXPECT_EQ(Regroups(r)[0].moves(0).from_rank(), r);
    EXPECT_EQ(Regroups(r)[0].moves(0).rank(), r);
    EXPECT_EQ(Regroups(r)[0].world_size(), 3);
  }
  ASSERT_EQ(links_[2]->Assignments().size(), 1u);
  EXPECT_TRUE(links_[2]->Assignments()[0].joins_in_place());
  EXPECT_EQ(links_[2]->Assignments()[0].rank(), 2);
  absl::StatusOr<Rendezvous::RegroupPlace> place =
      rendezvous_.AwaitRegroup({job.id(), 1}, 1, 0);
  ASSERT_TRUE(place.ok()) << place.status();
  EXPECT_EQ(place->generation, 2);
  EXPECT_EQ(place->rank, 1);
}

// Before its generation has logged a step, the job grows as before: a
// restart from the checkpoint just reported, not counted.
TEST_F(InPlaceTest, AnElasticJobStillStartingGrowsByARestart) {
  const v1::Job job = StartTraining(
      2, 24, "{in_place: true, elastic: true, min_workers: 2, max_workers: 3}");
  links_.push_back(AddWorker("w3", 1));
  Checkpoint("w1", job.id(), 1, 20);
  const v1::Job after = *jobs_.Get(job.id());
  EXPECT_EQ(after.state(), v1::JOB_STATE_RESTARTING);
  EXPECT_THAT(after.reason(), HasSubstr("growing from 2 to 3 ranks (elastic)"));
  EXPECT_TRUE(Regroups(0).empty());
}

// A lost node's ranks go to a free worker's slots.
TEST_F(InPlaceTest, ALostWorkerIsReplacedOnAFreeWorker) {
  const v1::Job job = StartTraining(3, 24, "{in_place: true, min_workers: 2}");
  links_.push_back(AddWorker("w4", 2));
  jobs_.WorkerDisconnected("w2", links_[1].get());
  const v1::Job after = *jobs_.Get(job.id());
  EXPECT_EQ(after.world_size(), 3);
  ASSERT_EQ(after.ranks_size(), 3);
  EXPECT_EQ(after.ranks(1).worker(), "w3");  // old rank 2 moves down
  EXPECT_EQ(after.ranks(2).worker(), "w4");
  EXPECT_THAT(after.reason(), HasSubstr("worker w2 running rank 1 was lost: its stream "
                                        "closed; recovered in place: generation 2 goes "
                                        "on with 3 of 3 ranks: 2 from their state in "
                                        "memory, 1 new on w4"));
  ASSERT_EQ(links_[3]->Assignments().size(), 1u);
  EXPECT_TRUE(links_[3]->Assignments()[0].joins_in_place());
  // One free slot of w4 is left for others.
  for (const v1::WorkerInfo& w : jobs_.Workers()) {
    EXPECT_EQ(w.slots_free(), w.name() == "w4" ? 1 : 0) << w.name();
  }
}

// A higher priority waits in the queue for slots: they are its first, and
// the job goes on with its survivors.
TEST_F(InPlaceTest, AHigherPriorityJobWaitingKeepsTheFreeSlots) {
  jobs_.SetSchedulingConfig(
      TestPolicy("classes: {low: 0, high: 10}\ndefault_class: low\n"));
  // No checkpoints: never preempted, so the high job waits.
  for (int w = 1; w <= 4; ++w) links_.push_back(AddWorker("w" + std::to_string(w), 1));
  const v1::Job job = *jobs_.Submit(
      FaultSpec(3, 24, "fault_tolerance: {in_place: true, min_workers: 2}\n", "{}"), false);
  ASSERT_EQ(jobs_.Get(job.id())->state(), v1::JOB_STATE_RUNNING);
  RunRanks(job.id(), {Worker(0), Worker(1), Worker(2)});
  const v1::Job high = *jobs_.Submit(kHighPriorityJob, false);
  ASSERT_EQ(jobs_.Get(high.id())->state(), v1::JOB_STATE_QUEUED);
  jobs_.WorkerDisconnected("w2", links_[1].get());
  const v1::Job after = *jobs_.Get(job.id());
  EXPECT_EQ(after.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(after.world_size(), 2);
  EXPECT_TRUE(links_[3]->Assignments().empty());
}

// The new rank 0 reports the interrupted step's train point again when it
// cannot know whether the lost rank 0 did: the history keeps one.
TEST_F(InPlaceTest, ATrainPointReportedAgainAfterARegroupIsKeptOnce) {
  const v1::Job job = StartTraining(3, 24, "{in_place: true, min_workers: 2}");
  auto train = [&](const std::string& worker, int generation, int64_t step, int64_t seq) {
    v1::RankMetrics m;
    m.set_job_id(job.id());
    m.set_generation(generation);
    m.set_seq(seq);
    m.mutable_point()->set_kind("train");
    m.mutable_point()->set_step(step);
    (*m.mutable_point()->mutable_values())["loss"] = 1.0 / static_cast<double>(step);
    ASSERT_TRUE(jobs_.OnRankMetrics(worker, m).ok());
  };
  train("w1", 1, 30, 1);
  jobs_.WorkerDisconnected("w1", links_[0].get());  // rank 0 is lost
  train("w2", 2, 30, 1);  // the old rank 1, now rank 0, reports step 30 again
  train("w2", 2, 35, 2);
  std::vector<int64_t> steps;
  for (const v1::JobEvent& e : Events(job.id())) {
    if (e.has_metric() && e.metric().kind() == "train") steps.push_back(e.metric().step());
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{30, 35}));
}

// Rank 0 wrote a checkpoint just before the regroup, and its report comes
// after it under the new generation (the agent renamed the process): the
// same process wrote the file, so it is cataloged. A file of another
// generation still is not.
TEST_F(InPlaceTest, ACheckpointWrittenJustBeforeTheRegroupIsCataloged) {
  const v1::Job job = StartTraining(3, 24, "{in_place: true, min_workers: 2}");
  Exit("w3", job.id(), 2, 3);
  ASSERT_EQ(jobs_.Get(job.id())->generation(), 2);
  auto report = [&](int64_t step, const std::string& name, int64_t seq) {
    v1::RankCheckpoint c;
    c.set_job_id(job.id());
    c.set_generation(2);
    c.set_seq(seq);
    c.mutable_checkpoint()->set_step(step);
    c.mutable_checkpoint()->set_path("/ckpt/" + job.id() + "/" + name);
    return jobs_.OnRankCheckpoint("w1", c);
  };
  EXPECT_TRUE(report(30, "step-000000030-g1.ckpt", 1).ok());
  std::vector<int64_t> steps;
  const absl::StatusOr<std::vector<v1::Checkpoint>> catalog = jobs_.Checkpoints(job.id());
  ASSERT_TRUE(catalog.ok()) << catalog.status();
  for (const v1::Checkpoint& c : *catalog) {
    steps.push_back(c.step());
    if (c.step() == 30) {
      EXPECT_EQ(c.generation(), 1);
    }
  }
  EXPECT_EQ(steps, (std::vector<int64_t>{10, 30}));
  EXPECT_EQ(report(40, "step-000000040-g3.ckpt", 2).code(),
            absl::StatusCode::kInvalidArgument);  // no generation 3 yet
}

// No free slot anywhere: the job shrinks to its survivors.
TEST_F(InPlaceTest, RanksAfterTheLostOneMoveDown) {
  const v1::Job job = StartTraining(3, 24, "{in_place: true, min_workers: 2}");
  jobs_.WorkerDisconnected("w2", links_[1].get());
  const v1::Job after = *jobs_.Get(job.id());
  ASSERT_EQ(after.ranks_size(), 2);
  EXPECT_EQ(after.ranks(1).worker(), "w3");
  ASSERT_EQ(Regroups(2).size(), 1u);
  EXPECT_EQ(Regroups(2)[0].moves(0).from_rank(), 2);
  EXPECT_EQ(Regroups(2)[0].moves(0).rank(), 1);
  // A late report under the old identity is refused.
  v1::RankStatus late;
  late.set_job_id(job.id());
  late.set_generation(1);
  late.set_rank(2);
  late.set_exit_code(1);
  EXPECT_EQ(jobs_.OnRankStatus("w3", late).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(jobs_.Get(job.id())->state(), v1::JOB_STATE_RUNNING);
}

TEST_F(InPlaceTest, ALostWorkerRegroupsTheSurvivors) {
  const v1::Job job = StartTraining(3, 24, "{in_place: true, min_workers: 2}");
  jobs_.WorkerDisconnected("w3", links_[2].get());
  const v1::Job after = *jobs_.Get(job.id());
  EXPECT_EQ(after.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(after.generation(), 2);
  EXPECT_EQ(after.world_size(), 2);
  EXPECT_THAT(after.reason(), HasSubstr("worker w3 running rank 2 was lost: its stream "
                                        "closed; recovered in place"));
}

TEST_F(InPlaceTest, WhatTheBatchCannotSplitOverIsLeftOut) {
  const v1::Job job = StartTraining(4, 16, "{in_place: true, min_workers: 2}");
  jobs_.WorkerDisconnected("w2", links_[1].get());
  const v1::Job after = *jobs_.Get(job.id());
  EXPECT_EQ(after.world_size(), 2);  // 3 survivors, but 16 splits over 2
  ASSERT_EQ(after.ranks_size(), 2);
  EXPECT_EQ(after.ranks(1).worker(), "w3");
  EXPECT_EQ(links_[3]->Cancels(), 1);  // old rank 3 is stopped
  EXPECT_EQ(links_[3]->sent.back().cancel().generation(), 1);
  EXPECT_EQ(rendezvous_.AwaitRegroup({job.id(), 1}, 3, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(InPlaceTest, TooFewSurvivorsRestartFromTheCheckpoint) {
  const v1::Job job = StartTraining(3, 24, "{in_place: true, min_workers: 3}");
  jobs_.WorkerDisconnected("w3", links_[2].get());
  const v1::Job after = *jobs_.Get(job.id());
  EXPECT_EQ(after.state(), v1::JOB_STATE_RESTARTING);
  EXPECT_THAT(after.reason(), HasSubstr("from the checkpoint at step 10"));
  EXPECT_TRUE(Regroups(0).empty());
  // The survivors waiting for a place hear there is none.
  EXPECT_EQ(rendezvous_.AwaitRegroup({job.id(), 1}, 0, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(InPlaceTest, ARankStillStartingMeansARestart) {
  const v1::Job job = StartTraining(3, 24, "{in_place: true, min_workers: 2}", "starting");
  Exit("w3", job.id(), 2, 3);
  EXPECT_EQ(jobs_.Get(job.id())->state(), v1::JOB_STATE_RESTARTING);
}

TEST_F(InPlaceTest, WithoutInPlaceALossStillRestarts) {
  const v1::Job job = StartTraining(3, 24, "{min_workers: 2}");
  Exit("w3", job.id(), 2, 3);
  EXPECT_EQ(jobs_.Get(job.id())->state(), v1::JOB_STATE_RESTARTING);
  EXPECT_TRUE(Regroups(0).empty());
}

TEST_F(InPlaceTest, NoRestartsLeftFailsTheJob) {
  const v1::Job job = StartTraining(3, 24, "{in_place: true, min_workers: 2, max_restarts: 0}");
  Exit("w3", job.id(), 2, 3);
  EXPECT_EQ(jobs_.Get(job.id())->state(), v1::JOB_STATE_FAILED);
}

}  // namespace
}  // namespace trainctl::coordinator
