// JobManager and lost workers, driven with fakes: a restart on fewer ranks,
// a restart that waits for a world size that divides the batch, and a loss
// that arrives just after a peer's exit (its symptom) named as the cause.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/job_manager_faults_fixture.h"

namespace trainctl::coordinator {
namespace {

using ::testing::HasSubstr;

TEST_F(JobManagerFaultsTest, LostWorkerRestartsOnFewerRanks) {
  auto w1 = AddWorker("w1", 1);
  auto w2 = AddWorker("w2", 1);
  auto w3 = AddWorker("w3", 1);
  v1::Job job = *jobs_.Submit(
      FaultSpec(3, 24, "fault_tolerance: {min_workers: 2}\n"), false);
  Checkpoint("w1", job.id(), 1, 10);
  jobs_.WorkerDisconnected("w3", w3.get());
  v1::Job restarting = *jobs_.Get(job.id());
  EXPECT_EQ(restarting.state(), v1::JOB_STATE_RESTARTING);
  EXPECT_THAT(restarting.reason(), HasSubstr("worker w3 running rank 2 was lost"));
  Exit("w1", job.id(), 0, -15);
  EXPECT_EQ(jobs_.Get(job.id())->state(), v1::JOB_STATE_RESTARTING);
  Exit("w2", job.id(), 1, -15);
  v1::Job running = *jobs_.Get(job.id());
  EXPECT_EQ(running.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(running.world_size(), 2);
  EXPECT_EQ(running.ranks_size(), 2);
  EXPECT_EQ(w1->Assignments().back().world_size(), 2);
  EXPECT_EQ(w1->Assignments().back().resume().step(), 10);
}

// A node dies: its peers' collectives fail at once, and a peer's exit can
// reach the coordinator a moment before the dead node's stream closes. The
// restart stays one; the job's reason and log name the lost worker as the
// cause. A loss long after the exit is not taken for its cause.
class LossAfterPeerExitTest : public JobManagerFaultsTest {
 protected:
  // Rank 0 exits on a reset connection; `later_ms` after, w3 (rank 2) is
  // lost. Fills ended_ (the job as the exit left it) and notes_.
  v1::Job LoseW3After(int64_t later_ms) {
    AddWorker("w1", 1);
    AddWorker("w2", 1);
    auto w3 = AddWorker("w3", 1);
    v1::Job job = *jobs_.Submit(
        FaultSpec(3, 24, "fault_tolerance: {min_workers: 2, max_restarts: 2}\n"), false);
    Checkpoint("w1", job.id(), 1, 10);
    Exit("w1", job.id(), 0, 1, "Connection reset by peer");
    ended_ = *jobs_.Get(job.id());
    EXPECT_EQ(ended_.state(), v1::JOB_STATE_RESTARTING);
    clock_.AdvanceMs(later_ms);
    jobs_.WorkerDisconnected("w3", w3.get());
    const v1::Job after = *jobs_.Get(job.id());
    EXPECT_EQ(after.state(), v1::JOB_STATE_RESTARTING);
    EXPECT_EQ(after.restarts(), 1);  // one restart, whatever came first
    EXPECT_EQ(after.ranks(2).state(), v1::RANK_STATE_LOST);
    // The transition keeps what was known when it was made.
    EXPECT_EQ(after.transitions().rbegin()->reason(), ended_.reason());
    for (const v1::JobEvent& e : Events(job.id())) {
      if (e.has_log() && e.log().text().rfind("[trainctl] worker", 0) == 0) {
        notes_.push_back(e.log().text());
      }
    }
    return after;
  }
  v1::Job ended_;
  std::vector<std::string> notes_;
};

TEST_F(LossAfterPeerExitTest, ALossJustAfterAPeersExitIsNamedAsItsCause) {
  const v1::Job job = LoseW3After(40);
  EXPECT_THAT(ended_.reason(), HasSubstr("rank 0 on worker w1 exited with code 1"));
  EXPECT_EQ(job.reason(),
            "worker w3 running rank 2 was lost: its stream closed (the exit before it "
            "was most likely a symptom: " + ended_.reason() + ")");
  ASSERT_EQ(notes_.size(), 1u);
  EXPECT_EQ(notes_[0],
            "[trainctl] worker w3 running rank 2 was lost: its stream closed, 40 ms "
            "after a peer's exit ended generation 1: that exit was most likely a symptom");
  Exit("w2", job.id(), 1, -15);  // the survivor stops: generation 2 starts
  const v1::Job running = *jobs_.Get(job.id());
  EXPECT_EQ(running.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(running.world_size(), 2);
}

TEST_F(LossAfterPeerExitTest, ALossLongAfterTheExitIsNotItsCause) {
  const v1::Job job = LoseW3After(JobManager::kPeerExitWindowMs + 1);
  EXPECT_EQ(job.reason(), ended_.reason());
  EXPECT_TRUE(notes_.empty());
}

TEST_F(JobManagerFaultsTest, RestartWaitsWhenNoWorldSizeDividesTheBatch) {
  auto w1 = AddWorker("w1", 1);
  auto w2 = AddWorker("w2", 1);
  auto w3 = AddWorker("w3", 1);
  // 3 ranks with batch 9: 2 ranks would not split it evenly.
  v1::Job job = *jobs_.Submit(
      FaultSpec(3, 9, "fault_tolerance: {min_workers: 2}\n"), false);
  jobs_.WorkerDisconnected("w3", w3.get());
  Exit("w1", job.id(), 0, -15);
  Exit("w2", job.id(), 1, -15);
  v1::Job waiting = *jobs_.Get(job.id());
  EXPECT_EQ(waiting.state(), v1::JOB_STATE_RESTARTING);
  EXPECT_EQ(waiting.pending_reason(),
            "needs 2 to 3 slots (a count that divides the batch of 9); 2 of "
            "2 registered slots free");
}

}  // namespace
}  // namespace trainctl::coordinator
