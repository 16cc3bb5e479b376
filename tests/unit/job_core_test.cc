// JobCore's rules as tables: inputs with their times in, effects out. No
// clock, store, hub or link fakes: the core does no I/O, so a test states
// what happens and reads what the core decided.

#include "job_core_fixture.h"

namespace trainctl::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST_F(JobCoreTest, AStartedJobOpensItsGenerationAndAssignsEachWorker) {
  Register("w1");
  Register("w2");
  core_.TakeEffects();
  const std::string id = Submit(TwoRankSpec("{max_restarts: 0}"));
  const Effects effects = core_.TakeEffects();
  // The submission's event is published by the shell's durable write; the
  // start is a transition, saved at once, and the rendezvous opens before
  // any agent hears of its ranks (the shell sends after the changes).
  EXPECT_THAT(
      Describe(effects.changes),
      ElementsAre("event 1 -> JOB_STATE_QUEUED", "event 2 -> JOB_STATE_RUNNING",
                  "open job-1 g1 of 2", "save now"));
  EXPECT_THAT(Messages(effects.messages),
              ElementsAre("w1: assign", "w2: assign"));
  EXPECT_EQ(Job(id).state(), v1::JOB_STATE_RUNNING);
}

// What a lost worker costs a running two-rank job, by its fault tolerance
// and whether it was checkpointed: the job's state, its reason, and what
// the core tells the world.
struct LossCase {
  std::string name;
  std::string fault_tolerance;
  bool checkpointed;
  v1::JobState state;
  std::string reason;
  std::vector<std::string> changes;
  std::vector<std::string> messages;
};

class LostWorkerTest : public JobCoreTest,
                       public ::testing::WithParamInterface<LossCase> {};

TEST_P(LostWorkerTest, TheLeaseRunsOutAndTheJobGoesOnAsItsSpecSays) {
  const LossCase& c = GetParam();
  Register("w1");
  Register("w2");
  const std::string id =
      Submit(TwoRankSpec(c.fault_tolerance, "{dir: /ckpt, every_steps: 40}"));
  At(1'000);
  core_.Heartbeat("w1");
  if (c.checkpointed) Checkpoint("w1", id, 1, 40, 1);
  core_.TakeEffects();

  // w2 went silent at the start; w1 beat at 1 s. At the lease exactly
  // nothing happens; a millisecond later w2 is lost.
  At(kLeaseMs);
  core_.CheckLeases();
  EXPECT_TRUE(core_.TakeEffects().empty());
  At(kLeaseMs + 1);
  core_.CheckLeases();
  const Effects effects = core_.TakeEffects();

  const v1::Job job = Job(id);
  EXPECT_EQ(job.state(), c.state);
  EXPECT_THAT(job.reason(), HasSubstr(c.reason));
  EXPECT_EQ(Describe(effects.changes), c.changes);
  EXPECT_EQ(Messages(effects.messages), c.messages);
  EXPECT_EQ(effects.disconnect.size(), 1u);  // w2's link is ended
}

INSTANTIATE_TEST_SUITE_P(
    JobCore, LostWorkerTest,
    ::testing::Values(
        LossCase{"NoRestartsLeftFails",
                 "{max_restarts: 0}",
                 false,
                 v1::JOB_STATE_FAILED,
                 "worker w2 running rank 1 was lost: its lease expired",
                 {"event 3 -> JOB_STATE_FAILED", "close job-1", "drop job-1",
                  "save now"},
                 {"w1: cancel"}},
        LossCase{"ARestartWaitsForSlotsFromTheBeginning",
                 "{max_restarts: 2}",
                 false,
                 v1::JOB_STATE_RESTARTING,
                 "restart 1 of 2 from the beginning (no checkpoint yet)",
                 // The log's note: what the restart waits for.
                 {"end job-1 g1", "event 3 -> JOB_STATE_RESTARTING",
                  "event 4 log", "save now"},
                 {"w1: cancel"}},
        LossCase{"ARestartResumesFromTheCatalogsNewest",
                 "{max_restarts: 2}",
                 true,
                 v1::JOB_STATE_RESTARTING,
                 "restart 1 of 2 from the checkpoint at step 40",
                 {"end job-1 g1", "event 4 -> JOB_STATE_RESTARTING",
                  "event 5 log", "save now"},
                 {"w1: cancel"}}),
    [](const auto& info) { return info.param.name; });

// In-place recovery's rules: a lost rank's survivors go on as the next
// generation when they can, on a spare slot or fewer ranks; else the job
// restarts from its checkpoint as before.
struct InPlaceCase {
  std::string name;
  int workers;  // of one slot each; the job has 3 ranks
  int batch;
  std::string starting_phase;  // rank 0's phase ("compute": past its start)
  v1::JobState state;
  int world;  // after it (0: restarting)
  std::string reason;
};

class InPlaceRecoveryTest : public JobCoreTest,
                            public ::testing::WithParamInterface<InPlaceCase> {
};

TEST_P(InPlaceRecoveryTest, ALostWorkersRankIsRecoveredWhereItCanBe) {
  const InPlaceCase& c = GetParam();
  for (int w = 1; w <= c.workers; ++w) Register("w" + std::to_string(w));
  const std::string id = Submit(
      "name: t\nranks: 3\nmodel: mlp\ndata: {train_images: a, train_labels: "
      "b}\n"
      "training: {batch_size: " +
      std::to_string(c.batch) +
      "}\n"
      "checkpoint: {dir: /ckpt, every_steps: 10}\n"
      "fault_tolerance: {in_place: true, min_workers: 2, max_restarts: 2}\n");
  const v1::Job started = Job(id);
  ASSERT_EQ(started.state(), v1::JOB_STATE_RUNNING);
  for (const v1::RankInfo& rank : started.ranks()) {
    Running(rank.worker(), id, rank.rank(),
            rank.rank() == 0 ? c.starting_phase : "compute");
  }
  core_.TakeEffects();
  const std::string lost = started.ranks(1).worker();
  core_.WorkerDisconnected(lost, nullptr);
  const Effects effects = core_.TakeEffects();

  const v1::Job job = Job(id);
  EXPECT_EQ(job.state(), c.state);
  EXPECT_THAT(job.reason(), HasSubstr(c.reason));
  const std::vector<std::string> changes = Describe(effects.changes);
  if (c.world > 0) {
    EXPECT_EQ(job.generation(), 2);
    EXPECT_EQ(job.world_size(), c.world);
    // The survivors' places are posted before their old scope closes, and
    // the new scope opens for the new world size.
    EXPECT_TRUE(
        InOrder(changes, {"regroup job-1 g1", "end job-1 g1",
                          "open job-1 g2 of " + std::to_string(c.world)}))
        << ::testing::PrintToString(changes);
    std::vector<std::string> regrouped;
    for (const AgentMessage& m : effects.messages) {
      if (m.message.has_regroup()) regrouped.push_back(m.worker);
    }
    EXPECT_EQ(regrouped.size(), 2u);  // each survivor's agent
  } else {
    EXPECT_THAT(changes, ::testing::Contains("end job-1 g1"));
    EXPECT_THAT(changes,
                ::testing::Not(::testing::Contains("regroup job-1 g1")));
  }
}

INSTANTIATE_TEST_SUITE_P(
    JobCore, InPlaceRecoveryTest,
    ::testing::Values(
        InPlaceCase{"AFreeSlotKeepsTheWorldSize", 4, 24, "compute",
                    v1::JOB_STATE_RUNNING, 3,
                    "goes on with 3 of 3 ranks: 2 from their state in memory, "
                    "1 new on"},
        InPlaceCase{"WithoutOneTheSurvivorsGoOnAlone", 3, 24, "compute",
                    v1::JOB_STATE_RUNNING, 2,
                    "goes on with 2 of 3 ranks from their state in memory"},
        InPlaceCase{
            "ABatchTheSurvivorsCannotSplitRestarts", 3, 27, "compute",
            v1::JOB_STATE_RESTARTING, 0,
            "not recovered in place: no number of the 2 ranks left that "
            "is at least min_workers (2) divides the global batch (27)"},
        InPlaceCase{"ARankStillStartingRestarts", 3, 24, "starting",
                    v1::JOB_STATE_RESTARTING, 0,
                    "not recovered in place: rank 0 is still starting"}),
    [](const auto& info) { return info.param.name; });

TEST_F(JobCoreTest, ARestartedJobStartsItsNextGenerationFromTheCheckpoint) {
  Register("w1");
  Register("w2");
  const std::string id =
      Submit(TwoRankSpec("{max_restarts: 2}", "{dir: /ckpt, every_steps: 40}"));
  Checkpoint("w1", id, 1, 40, 1);
  core_.WorkerDisconnected("w2", nullptr);
  ASSERT_EQ(Job(id).state(), v1::JOB_STATE_RESTARTING);
  core_.TakeEffects();

  // A free slot is not enough: rank 0 still holds w1's until it stops.
  Register("w3");
  EXPECT_EQ(Job(id).state(), v1::JOB_STATE_RESTARTING);
  EXPECT_EQ(Job(id).pending_reason(),
            "waiting for 1 rank of generation 1 to stop");
  core_.TakeEffects();
  Exited("w1", id, 1, 0);
  const Effects effects = core_.TakeEffects();
  const v1::Job job = Job(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(job.generation(), 2);
  EXPECT_EQ(job.resume_from().step(), 40);
  EXPECT_THAT(Messages(effects.messages),
              ElementsAre("w1: assign", "w3: assign"));
  for (const AgentMessage& m : effects.messages) {
    for (const v1::RankAssignment& a : m.message.assign().ranks()) {
      EXPECT_EQ(a.generation(), 2);
      EXPECT_EQ(a.resume().path(),
                "/ckpt/" + id + "/" + CheckpointFileName(40, 1));
    }
  }
}

TEST_F(JobCoreTest, ACheckpointIsCatalogedAndTheOldestPrunedPastKeepLast) {
  Register("w1");
  Register("w2");
  const std::string id = Submit(TwoRankSpec(
      "{max_restarts: 0}", "{dir: /ckpt, every_steps: 10, keep_last: 2}"));
  core_.TakeEffects();
  Checkpoint("w1", id, 1, 10, 1);
  Checkpoint("w1", id, 1, 20, 2);
  core_.TakeEffects();
  Checkpoint("w1", id, 1, 30, 3);
  const Effects effects = core_.TakeEffects();
  // The store gets the new entry and loses the pruned one, in that order;
  // rank 0's agent is asked to delete the file.
  EXPECT_THAT(Describe(effects.changes),
              ElementsAre("catalog job-1:30", "uncatalog job-1:10",
                          "event 5 metric checkpoint", "save grouped"));
  EXPECT_THAT(Messages(effects.messages), ElementsAre("w1: prune"));
  std::vector<int64_t> steps;
  const std::vector<v1::Checkpoint> catalog = *core_.Checkpoints(id);
  for (const v1::Checkpoint& c : catalog) steps.push_back(c.step());
  EXPECT_THAT(steps, ElementsAre(20, 30));
  // A re-sent report (same seq) is cataloged once.
  Checkpoint("w1", id, 1, 30, 3);
  EXPECT_TRUE(core_.TakeEffects().empty());
}

TEST_F(JobCoreTest, AReportOfAnEndedGenerationIsRefusedAndChangesNothing) {
  Register("w1");
  Register("w2");
  const std::string id = Submit(TwoRankSpec("{max_restarts: 2}"));
  core_.WorkerDisconnected("w2", nullptr);
  Register("w3");
  Exited("w1", id, 1, 0);
  ASSERT_EQ(Job(id).generation(), 2);
  core_.TakeEffects();
  v1::RankMetrics stale;
  stale.set_job_id(id);
  stale.set_generation(1);
  stale.set_seq(7);
  v1::MetricPoint* point = stale.mutable_point();
  point->set_rank(0);
  point->set_kind("train");
  point->set_step(3);
  EXPECT_EQ(core_.OnRankMetrics("w1", stale).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(core_.TakeEffects().empty());
}

TEST_F(JobCoreTest, RetentionDeletesTheOldestFinishedJobsAfterSavingTheRest) {
  core_.SetRetention({/*max_finished_jobs=*/1, /*max_age_ms=*/0});
  const std::string first = Submit(TwoRankSpec("{max_restarts: 0}"));
  const std::string second = Submit(TwoRankSpec("{max_restarts: 0}"));
  ASSERT_TRUE(core_.Cancel(first, "").ok());
  ASSERT_TRUE(core_.Cancel(second, "").ok());
  core_.TakeEffects();
  core_.CheckLeases();
  const Effects effects = core_.TakeEffects();
  EXPECT_THAT(Describe(effects.changes),
              ElementsAre("delete job-1", "forget job-1"));
  EXPECT_EQ(core_.Get(first).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(core_.Get(second).ok());
}

TEST_F(JobCoreTest, EventsAreNumberedPerJobFromTheStoredHistory) {
  JobCore::Recovered stored;
  stored.next_job_number = 8;
  JobCore::RecoveredJob queued;
  queued.job.set_id("job-7");
  queued.job.set_state(v1::JOB_STATE_QUEUED);
  *queued.job.mutable_spec() = *ParseJobSpec(TwoRankSpec("{max_restarts: 0}"));
  queued.last_seq = 41;
  stored.jobs.push_back(queued);
  ASSERT_TRUE(core_.Restore(std::move(stored)).ok());
  // The first pass notes in its log why it waits (no worker yet).
  EXPECT_THAT(Describe(core_.TakeEffects().changes),
              ElementsAre("event 42 log", "save grouped"));
  ASSERT_TRUE(core_.Cancel("job-7", "").ok());
  EXPECT_THAT(Describe(core_.TakeEffects().changes),
              ElementsAre("event 43 -> JOB_STATE_CANCELLED", "close job-7",
                          "drop job-7", "save now"));
  EXPECT_EQ(Submit(TwoRankSpec("{max_restarts: 0}")), "job-8");
}

}  // namespace
}  // namespace trainctl::coordinator
