// JobManager's fault tolerance driven with fakes: restarts from checkpoints,
// max_restarts, cancel during a restart, hangs, the catalog and
// its retention, resuming another job's checkpoint, re-adopting ranks after
// a coordinator restart, and elastic growth (lost workers:
// job_manager_lost_worker_test.cc).

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/unit/job_manager_faults_fixture.h"

namespace trainctl::coordinator {
namespace {

using ::testing::HasSubstr;

TEST_F(JobManagerFaultsTest, FailedRankRestartsFromLatestCheckpoint) {
  auto w1 = AddWorker("w1", 1);
  auto w2 = AddWorker("w2", 1);
  v1::Job job = *jobs_.Submit(
      FaultSpec(2, 16, "fault_tolerance: {max_restarts: 2}\n"), false);
  Checkpoint("w1", job.id(), 1, 10);
  Checkpoint("w1", job.id(), 1, 20);
  Exit("w2", job.id(), 1, 1, "boom");

  v1::Job restarting = *jobs_.Get(job.id());
  EXPECT_EQ(restarting.state(), v1::JOB_STATE_RESTARTING);
  EXPECT_EQ(restarting.reason(),
            "rank 1 on worker w2 exited with code 1: boom; restart 1 of 2 "
            "from the checkpoint at step 20");
  EXPECT_EQ(restarting.restarts(), 1);
  EXPECT_EQ(w1->Cancels(), 1);
  // Rank 0 still holds its slot: the next generation waits for it.
  EXPECT_EQ(restarting.pending_reason(),
            "waiting for 1 rank of generation 1 to stop");

  Exit("w1", job.id(), 0, -15);
  v1::Job running = *jobs_.Get(job.id());
  EXPECT_EQ(running.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(running.generation(), 2);
  EXPECT_EQ(running.world_size(), 2);
  EXPECT_THAT(running.reason(), HasSubstr("at step 20"));
  ASSERT_EQ(w2->Assignments().size(), 2u);
  const v1::RankAssignment again = w2->Assignments()[1];
  EXPECT_EQ(again.generation(), 2);
  EXPECT_EQ(again.resume().step(), 20);
  EXPECT_EQ(again.resume().path(), "/ckpt/" + job.id() + "/step-20.ckpt");

  // A late checkpoint report from generation 1 is refused.
  v1::RankCheckpoint late;
  late.set_job_id(job.id());
  late.set_generation(1);
  late.mutable_checkpoint()->set_step(30);
  EXPECT_FALSE(jobs_.OnRankCheckpoint("w1", late).ok());
}

TEST_F(JobManagerFaultsTest, ExhaustedRestartsFailWithTheReason) {
  AddWorker("w1", 1);
  v1::Job job = *jobs_.Submit(
      FaultSpec(1, 8, "fault_tolerance: {max_restarts: 1}\n"), false);
  Exit("w1", job.id(), 0, 1, "first", 1);
  EXPECT_EQ(jobs_.Get(job.id())->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(jobs_.Get(job.id())->generation(), 2);
  Exit("w1", job.id(), 0, 1, "second", 2);
  v1::Job failed = *jobs_.Get(job.id());
  EXPECT_EQ(failed.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(failed.reason(),
            "rank 0 on worker w1 exited with code 1: second; no restarts "
            "left (1 of 1 used)");
}

TEST_F(JobManagerFaultsTest, CancelDuringRestartWins) {
  auto w1 = AddWorker("w1", 1);
  AddWorker("w2", 1);
  v1::Job job = *jobs_.Submit(FaultSpec(2, 16, ""), false);
  Exit("w2", job.id(), 1, 1);
  ASSERT_EQ(jobs_.Get(job.id())->state(), v1::JOB_STATE_RESTARTING);
  v1::Job cancelled = *jobs_.Cancel(job.id(), "");
  EXPECT_EQ(cancelled.state(), v1::JOB_STATE_CANCELLED);
  Exit("w1", job.id(), 0, -15);  // the survivor stops afterwards
  v1::Job after = *jobs_.Get(job.id());
  EXPECT_EQ(after.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(after.generation(), 1);
  for (const auto& w : jobs_.Workers()) EXPECT_EQ(w.slots_free(), 1);
}


TEST_F(JobManagerFaultsTest, HungRankIsNamedAndTheGenerationRestarts) {
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  v1::Job job = *jobs_.Submit(
      FaultSpec(2, 16, "fault_tolerance: {hang_timeout_s: 5}\n"), false);
  Progress("w1", job.id(), 0, 10, 11, "all-reduce");
  Progress("w2", job.id(), 1, 10, 10, "compute");
  clock_.AdvanceMs(4'000);
  Progress("w1", job.id(), 0, 10, 11, "all-reduce");
  Progress("w2", job.id(), 1, 10, 10, "compute");
  jobs_.CheckLeases();
  EXPECT_EQ(jobs_.Get(job.id())->state(), v1::JOB_STATE_RUNNING);
  clock_.AdvanceMs(2'000);
  Progress("w1", job.id(), 0, 10, 11, "all-reduce");
  Progress("w2", job.id(), 1, 10, 10, "compute");
  jobs_.CheckLeases();
  v1::Job hung = *jobs_.Get(job.id());
  EXPECT_EQ(hung.state(), v1::JOB_STATE_RESTARTING);
  EXPECT_THAT(hung.reason(),
              HasSubstr("rank 1 on worker w2 stuck in compute at step 10 for "
                        "6 s, last report 0 s ago (rank 0 waits in all-reduce "
                        "#11 at step 10)"));
}

// An evaluation, rank 0's checkpoint and a generation's first step have
// their own bounds: the others waiting for them that long is no hang, a
// stall past the bound is, and the reason names the bound.
TEST_F(JobManagerFaultsTest, LongPhasesHaveTheirOwnBounds) {
  struct Case {
    const char* phase;
    int64_t step;
    const char* field;
  };
  for (const Case& c : {Case{"evaluation", 10, "eval_timeout_s"},
                        Case{"checkpoint", 10, "checkpoint_timeout_s"},
                        Case{"compute", 0, "first_step_timeout_s"}}) {
    SCOPED_TRACE(c.phase);
    auto w1 = AddWorker(std::string("a-") + c.field, 1);
    auto w2 = AddWorker(std::string("b-") + c.field, 1);
    v1::Job job = *jobs_.Submit(
        FaultSpec(2, 16,
                  std::string("fault_tolerance: {hang_timeout_s: 5, ") + c.field +
                      ": 30, max_restarts: 1}\n"),
        false);
    const std::string a = job.ranks(0).worker(), b = job.ranks(1).worker();
    Progress(a, job.id(), 0, c.step, 3, c.phase);
    Progress(b, job.id(), 1, c.step, 4, "all-reduce");  // waits for rank 0
    for (int s = 0; s < 29; ++s) {
      clock_.AdvanceMs(1'000);
      Progress(a, job.id(), 0, c.step, 3, c.phase);
      Progress(b, job.id(), 1, c.step, 4, "all-reduce");
      jobs_.CheckLeases();
    }
    ASSERT_EQ(jobs_.Get(job.id())->state(), v1::JOB_STATE_RUNNING);
    clock_.AdvanceMs(2'000);  // 31 s: past the phase's bound
    Progress(b, job.id(), 1, c.step, 4, "all-reduce");  // rank 0's node is silent
    jobs_.CheckLeases();
    v1::Job hung = *jobs_.Get(job.id());
    EXPECT_EQ(hung.state(), v1::JOB_STATE_RESTARTING);
    EXPECT_THAT(hung.reason(),
                HasSubstr(absl::StrCat("rank 0 on worker ", a, " stuck in ", c.phase,
                                       " at step ", c.step, " for 31 s (over ",
                                       c.field, " 30), last report 2 s ago")));
    (void)jobs_.Cancel(job.id(), "next case");
  }
}

TEST_F(JobManagerFaultsTest, ProgressThatMovesIsNotAHang) {
  AddWorker("w1", 1);
  v1::Job job = *jobs_.Submit(
      FaultSpec(1, 8, "fault_tolerance: {hang_timeout_s: 5}\n"), false);
  for (int step = 1; step <= 5; ++step) {
    clock_.AdvanceMs(3'000);
    Progress("w1", job.id(), 0, step, step, "compute");
    jobs_.CheckLeases();
  }
  EXPECT_EQ(jobs_.Get(job.id())->state(), v1::JOB_STATE_RUNNING);
}

TEST_F(JobManagerFaultsTest, RetentionKeepsTheNewestAndTheBest) {
  auto w1 = AddWorker("w1", 1);
  v1::Job job = *jobs_.Submit(
      FaultSpec(1, 8, "",
                "{dir: /ckpt, keep_last: 2, keep_best_by: eval_accuracy}"),
      false);
  Checkpoint("w1", job.id(), 1, 10, {{"accuracy", 0.9}});
  Checkpoint("w1", job.id(), 1, 20, {{"accuracy", 0.8}});
  Checkpoint("w1", job.id(), 1, 30, {{"accuracy", 0.85}});
  Checkpoint("w1", job.id(), 1, 40);
  std::vector<int64_t> steps;
  // Held in a local: `*jobs_.Checkpoints(...)` in the loop header would
  // iterate the vector of a StatusOr already destroyed (ASan:
  // stack-use-after-scope in the `sanitize` test).
  auto checkpoints = jobs_.Checkpoints(job.id());
  ASSERT_TRUE(checkpoints.ok()) << checkpoints.status();
  for (const auto& c : *checkpoints) steps.push_back(c.step());
  EXPECT_EQ(steps, (std::vector<int64_t>{10, 30, 40}));
  std::vector<std::string> deleted;
  for (const auto& m : w1->sent) {
    for (const auto& p : m.delete_checkpoints().paths()) deleted.push_back(p);
    if (m.has_delete_checkpoints()) {
      EXPECT_EQ(m.delete_checkpoints().dir(), "/ckpt/" + job.id());
    }
  }
  EXPECT_EQ(deleted,
            (std::vector<std::string>{"/ckpt/" + job.id() + "/step-20.ckpt"}));
  // The last prune also names what stays, and that files older than all of
  // it are dead, so a deletion lost with a coordinator is caught up.
  const v1::DeleteCheckpoints* last = nullptr;
  for (const auto& m : w1->sent) {
    if (m.has_delete_checkpoints()) last = &m.delete_checkpoints();
  }
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(last->stale_below_step(), 10);
  EXPECT_EQ(std::vector<std::string>(last->keep().begin(), last->keep().end()),
            (std::vector<std::string>{"/ckpt/" + job.id() + "/step-10.ckpt",
                                      "/ckpt/" + job.id() + "/step-30.ckpt",
                                      "/ckpt/" + job.id() + "/step-40.ckpt"}));
  // Each checkpoint is also an event that watchers see.
  int checkpoint_events = 0;
  for (const auto& e : Events(job.id())) {
    checkpoint_events += e.metric().kind() == "checkpoint";
  }
  EXPECT_EQ(checkpoint_events, 4);
}

TEST_F(JobManagerFaultsTest, SubmitResumesFromAnotherJobsCheckpoint) {
  auto w1 = AddWorker("w1", 2);
  v1::Job first = *jobs_.Submit(FaultSpec(1, 8, ""), false);
  Checkpoint("w1", first.id(), 1, 10);
  Checkpoint("w1", first.id(), 1, 20);
  v1::Job second =
      *jobs_.Submit(FaultSpec(1, 8, ""), false, first.id() + ":10");
  EXPECT_EQ(second.resume_from().step(), 10);
  EXPECT_EQ(w1->Assignments().back().job_id(), second.id());
  EXPECT_EQ(w1->Assignments().back().resume().path(),
            "/ckpt/" + first.id() + "/step-10.ckpt");
  v1::Job latest = *jobs_.Submit(FaultSpec(1, 8, ""), true, first.id());
  EXPECT_EQ(latest.resume_from().step(), 20);

  absl::StatusOr<v1::Job> missing =
      jobs_.Submit(FaultSpec(1, 8, ""), false, first.id() + ":15");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("no checkpoint at step 15 (it has steps 10, 20)"));
  EXPECT_EQ(jobs_.Submit(FaultSpec(1, 8, ""), false, "job-99").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(JobManagerFaultsTest, ReconnectingAgentReadoptsRanksAfterRecover) {
  auto w1 = AddWorker("w1", 1);
  v1::Job job = *jobs_.Submit(FaultSpec(1, 8, ""), false);
  v1::Job other = *jobs_.Submit(FaultSpec(1, 8, ""), false);  // queued
  // Reports 1 and 2 arrive, then 2 again (a re-send): kept once.
  for (int64_t seq : {1, 2, 2}) {
    v1::RankMetrics m;
    m.set_job_id(job.id());
    m.set_generation(1);
    m.set_seq(seq);
    m.mutable_point()->set_kind("train");
    m.mutable_point()->set_step(seq);
    ASSERT_TRUE(jobs_.OnRankMetrics("w1", m).ok());
  }
  v1::RankLog line;  // a log line shares the rank's numbering
  line.set_job_id(job.id());
  line.set_generation(1);
  line.set_seq(3);
  line.mutable_line()->set_text("step 2");
  ASSERT_TRUE(jobs_.OnRankLog("w1", line).ok());
  int train_events = 0;
  for (const auto& e : Events(job.id())) train_events += e.has_metric();
  EXPECT_EQ(train_events, 2);

  EventHub events;
  Rendezvous rendezvous;
  JobManager restarted(clock_, events, rendezvous, store_, 5'000, 1'000);
  ASSERT_TRUE(restarted.Recover().ok());
  auto link = std::make_shared<FakeAgentLink>();
  v1::RegisterRequest reg;
  reg.set_name("w1");
  reg.set_slots(1);
  v1::RankStatus* mine = reg.add_ranks();
  mine->set_job_id(job.id());
  mine->set_generation(1);
  mine->set_rank(0);
  mine->set_running(true);
  mine->set_pid(4242);
  v1::RankStatus* stale = reg.add_ranks();
  stale->set_job_id("job-77");
  stale->set_generation(3);
  stale->set_running(true);
  ASSERT_TRUE(restarted.RegisterWorker(reg, link).ok());
  // The agent learns the last report the coordinator kept from the rank.
  ASSERT_TRUE(link->sent[0].has_registered());
  ASSERT_EQ(link->sent[0].registered().cursors_size(), 1);
  EXPECT_EQ(link->sent[0].registered().cursors(0).job_id(), job.id());
  // Rebuilt from the stored events: admitting a report does not write the
  // job itself.
  EXPECT_EQ(link->sent[0].registered().cursors(0).last_seq(), 3);

  v1::Job adopted = *restarted.Get(job.id());
  EXPECT_EQ(adopted.latest_train().step(), 2);
  EXPECT_EQ(adopted.ranks(0).state(), v1::RANK_STATE_RUNNING);
  EXPECT_EQ(adopted.ranks(0).pid(), 4242);
  EXPECT_EQ(restarted.Get(other.id())->state(), v1::JOB_STATE_QUEUED);
  ASSERT_EQ(link->Cancels(), 1);  // the ranks no job owns
  EXPECT_EQ(link->sent.back().cancel().job_id(), "job-77");

  clock_.AdvanceMs(60'000);
  restarted.Heartbeat("w1");
  restarted.CheckLeases();
  EXPECT_EQ(restarted.Get(job.id())->state(), v1::JOB_STATE_RUNNING);
  v1::RankStatus done;
  done.set_job_id(job.id());
  done.set_generation(1);
  done.set_running(false);
  ASSERT_TRUE(restarted.OnRankStatus("w1", done).ok());
  EXPECT_EQ(restarted.Get(job.id())->state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(restarted.Get(other.id())->state(), v1::JOB_STATE_RUNNING);
}

// The ranks of a job finish while the coordinator is down (issue #15's
// 3 s outage): their exits, in the registrations and re-sent after them,
// end the job as SUCCEEDED in its first generation, not in a restart.
TEST_F(JobManagerFaultsTest, ExitsDuringAnOutageAreAcceptedAfterRecover) {
  auto w1 = AddWorker("w1", 1);
  auto w2 = AddWorker("w2", 1);
  v1::Job job = *jobs_.Submit(FaultSpec(2, 16, ""), false);
  ASSERT_EQ(jobs_.Get(job.id())->state(), v1::JOB_STATE_RUNNING);

  EventHub events;
  Rendezvous rendezvous;
  JobManager restarted(clock_, events, rendezvous, store_, 5'000, 1'000);
  ASSERT_TRUE(restarted.Recover().ok());
  auto come_back = [&](const std::string& worker, int rank) {
    auto link = std::make_shared<FakeAgentLink>();
    v1::RegisterRequest reg;
    reg.set_name(worker);
    reg.set_slots(1);
    // As the agent lists it: the rank it has not reaped yet, and its exit.
    v1::RankStatus* listed = reg.add_ranks();
    listed->set_job_id(job.id());
    listed->set_generation(1);
    listed->set_rank(rank);
    listed->set_running(true);
    v1::RankStatus* exited = reg.add_ranks();
    *exited = *listed;
    exited->set_running(false);
    exited->set_exit_code(0);
    EXPECT_TRUE(restarted.RegisterWorker(reg, link).ok());
    EXPECT_TRUE(link->sent[0].has_registered());
    // One cursor per rank, or the agent re-sends its reports twice.
    EXPECT_EQ(link->sent[0].registered().cursors_size(), 1);
    EXPECT_EQ(link->Cancels(), 0);
    EXPECT_TRUE(restarted.OnRankStatus(worker, *exited).ok());
    return link;
  };
  come_back("w1", 0);
  clock_.AdvanceMs(3'000);
  EXPECT_EQ(restarted.Get(job.id())->state(), v1::JOB_STATE_RUNNING);
  restarted.CheckLeases();
  come_back("w2", 1);
  v1::Job done = *restarted.Get(job.id());
  EXPECT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(done.generation(), 1);
  EXPECT_EQ(done.restarts(), 0);
  EXPECT_EQ(done.ranks(0).state(), v1::RANK_STATE_EXITED);
  EXPECT_EQ(done.ranks(1).state(), v1::RANK_STATE_EXITED);
}

// A slow start (a large database, a slow disk) does not eat into the
// agents' time to come back: it counts from when the server serves.
TEST_F(JobManagerFaultsTest, TheReattachWindowCountsFromServingNotFromRecover) {
  AddWorker("w1", 1);
  v1::Job job = *jobs_.Submit(FaultSpec(1, 8, ""), false);
  EventHub events;
  Rendezvous rendezvous;
  JobManager restarted(clock_, events, rendezvous, store_, 5'000, 1'000);
  ASSERT_TRUE(restarted.Recover().ok());
  const int64_t grace = 2 * 5'000 + 5'000;  // 2 x lease + 5 s
  clock_.AdvanceMs(grace + 1'000);  // Recover and the rest of start-up
  restarted.StartReattachWindow();
  restarted.CheckLeases();
  EXPECT_EQ(restarted.Get(job.id())->state(), v1::JOB_STATE_RUNNING);
  clock_.AdvanceMs(grace - 1);
  restarted.CheckLeases();
  EXPECT_EQ(restarted.Get(job.id())->state(), v1::JOB_STATE_RUNNING);
  clock_.AdvanceMs(2);
  restarted.CheckLeases();
  EXPECT_EQ(restarted.Get(job.id())->state(), v1::JOB_STATE_RESTARTING);
}

TEST_F(JobManagerFaultsTest, ElasticJobGrowsAtItsNextCheckpoint) {
  auto w1 = AddWorker("w1", 1);
  auto w2 = AddWorker("w2", 1);
  v1::Job job = *jobs_.Submit(
      FaultSpec(2, 24, "fault_tolerance: {max_workers: 3, elastic: true}\n"),
      false);
  Checkpoint("w1", job.id(), 1, 10);  // no free slot: stays at 2
  EXPECT_EQ(jobs_.Get(job.id())->state(), v1::JOB_STATE_RUNNING);
  auto w3 = AddWorker("w3", 1);
  Checkpoint("w1", job.id(), 1, 20);
  v1::Job growing = *jobs_.Get(job.id());
  EXPECT_EQ(growing.state(), v1::JOB_STATE_RESTARTING);
  EXPECT_THAT(growing.reason(), HasSubstr("growing from 2 to 3 ranks"));
  EXPECT_EQ(growing.restarts(), 0);
  Exit("w1", job.id(), 0, -15);
  Exit("w2", job.id(), 1, -15);
  v1::Job grown = *jobs_.Get(job.id());
  EXPECT_EQ(grown.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(grown.world_size(), 3);
  EXPECT_EQ(w3->Assignments().back().resume().step(), 20);
}

}  // namespace
}  // namespace trainctl::coordinator
