// The JobManager acting on preemptions (issue 17): the victim's ranks are
// asked to checkpoint and stop within their class's grace period, the job
// waits as PREEMPTED and resumes from the checkpoint they wrote, without
// using a restart; borrowed slots go back to a user within quota and stay
// there; a job that writes no checkpoints is never preempted.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/checkpoint_name.h"
#include "common/rank_exit.h"
#include "job_manager_fixture.h"

namespace trainctl::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kPolicy[] =
    "classes: {low: {value: 0, grace_seconds: 30}, high: 10}\n"
    "default_class: low\n";

// A job that checkpoints (so it may be preempted) of the given class.
std::string Checkpointing(int ranks, const std::string& priority) {
  return Spec(ranks, "fault_tolerance: {max_restarts: 0}\n"
                     "checkpoint: {dir: /ckpt, every_steps: 1000}\n"
                     "priority: " + priority + "\n");
}

std::vector<v1::CancelRanks> CancelsOf(const FakeAgentLink& link,
                                       const std::string& job) {
  std::vector<v1::CancelRanks> out;
  for (const auto& m : link.sent) {
    if (m.has_cancel() && m.cancel().job_id() == job) out.push_back(m.cancel());
  }
  return out;
}

class JobManagerPreemptionTest : public JobManagerTest {
 protected:
  // Rank 0 of `job` reports the checkpoint of `step` it wrote.
  void ReportCheckpoint(const std::string& worker, const std::string& job,
                        int64_t step, int generation = 1) {
    v1::RankCheckpoint c;
    c.set_job_id(job);
    c.set_generation(generation);
    c.set_seq(++seq_);
    c.mutable_checkpoint()->set_step(step);
    c.mutable_checkpoint()->set_path(absl::StrCat(
        "/ckpt/", job, "/", CheckpointFileName(step, generation)));
    ASSERT_TRUE(jobs_.OnRankCheckpoint(worker, c).ok());
  }

  void ExitAll(const std::string& job, int code) {
    const v1::Job now = *jobs_.Get(job);
    for (const v1::RankInfo& r : now.ranks()) {
      Exit(r.worker(), job, r.rank(), code, "", now.generation());
    }
  }

  int64_t seq_ = 0;
};

TEST_F(JobManagerPreemptionTest, AHigherClassStopsALowerJobThatResumesWhereItStopped) {
  jobs_.SetSchedulingConfig(TestPolicy(kPolicy));
  std::shared_ptr<FakeAgentLink> w1 = AddWorker("w1", 2);
  const v1::Job low = *jobs_.Submit(Checkpointing(2, "low"), false);
  ASSERT_EQ(jobs_.Get(low.id())->state(), v1::JOB_STATE_RUNNING);
  const v1::Job high = *jobs_.Submit(Checkpointing(2, "high"), false);

  v1::Job stopping = *jobs_.Get(low.id());
  EXPECT_EQ(stopping.state(), v1::JOB_STATE_PREEMPTED);
  EXPECT_EQ(stopping.preemptions(), 1);
  EXPECT_THAT(stopping.reason(),
              HasSubstr("preempted by job " + high.id() + " (priority 10 > 0)"));
  EXPECT_THAT(stopping.reason(), HasSubstr("grace 30 s"));
  // One message for the worker's two ranks: checkpoint first, then stop.
  std::vector<v1::CancelRanks> asked = CancelsOf(*w1, low.id());
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_TRUE(asked[0].checkpoint_first());
  EXPECT_EQ(asked[0].grace_ms(), 30'000);
  EXPECT_EQ(asked[0].generation(), 1);
  // The urgent job waits for the slots it claimed, not behind anyone; the
  // victim is in the queue view at once.
  EXPECT_EQ(jobs_.Get(high.id())->state(), v1::JOB_STATE_QUEUED);
  EXPECT_THAT(jobs_.Get(high.id())->pending_reason(),
              HasSubstr("preempting job " + low.id()));
  EXPECT_EQ(stopping.pending_reason(),
            "waiting for 2 ranks of generation 1 to checkpoint and stop");
  const v1::GetQueueResponse queue = jobs_.Queue();
  ASSERT_EQ(queue.jobs_size(), 2);
  EXPECT_EQ(queue.jobs(1).job_id(), low.id());
  EXPECT_EQ(queue.jobs(1).state(), v1::JOB_STATE_PREEMPTED);
  bool said_preempting = false;
  for (const v1::JobEvent& e : Events(high.id())) {
    said_preempting |= e.has_log() &&
                       e.log().text().find("preempting job " + low.id()) !=
                           std::string::npos;
  }
  EXPECT_TRUE(said_preempting);

  // The ranks checkpoint step 21 and stop.
  ReportCheckpoint("w1", low.id(), 21);
  Exit("w1", low.id(), 1, kRankExitStopped);
  EXPECT_EQ(jobs_.Get(high.id())->state(), v1::JOB_STATE_QUEUED);  // one left
  EXPECT_THAT(jobs_.Get(high.id())->pending_reason(),
              HasSubstr("waiting for slots of stopping jobs"));
  EXPECT_THAT(jobs_.Get(low.id())->pending_reason(),
              HasSubstr("waiting for 1 rank of generation 1 to checkpoint and stop"));
  Exit("w1", low.id(), 0, kRankExitStopped);
  EXPECT_EQ(jobs_.Get(high.id())->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(jobs_.Get(low.id())->state(), v1::JOB_STATE_PREEMPTED);

  ExitAll(high.id(), 0);
  const v1::Job resumed = *jobs_.Get(low.id());
  EXPECT_EQ(resumed.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(resumed.generation(), 2);
  EXPECT_EQ(resumed.restarts(), 0);  // a preemption is not a failure
  EXPECT_EQ(resumed.resume_from().step(), 21);
  EXPECT_THAT(resumed.reason(), HasSubstr("resuming from the checkpoint of " +
                                          low.id() + " at step 21"));
  std::vector<v1::RankAssignment> assigned = w1->Assignments();
  ASSERT_GE(assigned.size(), 2u);
  EXPECT_EQ(assigned.back().generation(), 2);
  EXPECT_EQ(assigned.back().resume().step(), 21);
  std::vector<v1::JobState> path;
  for (const v1::Transition& t : resumed.transitions()) path.push_back(t.to());
  EXPECT_THAT(path, ::testing::ElementsAre(
                        v1::JOB_STATE_QUEUED, v1::JOB_STATE_RUNNING,
                        v1::JOB_STATE_PREEMPTED, v1::JOB_STATE_RUNNING));
}

TEST_F(JobManagerPreemptionTest, AnElasticVictimComesBackAtOnceOnWhatIsLeft) {
  jobs_.SetSchedulingConfig(TestPolicy(kPolicy));
  AddWorker("w1", 4);
  const v1::Job elastic = *jobs_.Submit(
      Spec(3, "fault_tolerance: {elastic: true, min_workers: 1, max_workers: 4}\n"
              "checkpoint: {dir: /ckpt, every_steps: 1000}\npriority: low\n"),
      false);
  ASSERT_EQ(jobs_.Get(elastic.id())->world_size(), 3);
  const v1::Job high = *jobs_.Submit(Checkpointing(2, "high"), false);
  const v1::Job shrinking = *jobs_.Get(elastic.id());
  ASSERT_EQ(shrinking.state(), v1::JOB_STATE_PREEMPTED);
  EXPECT_THAT(shrinking.reason(), HasSubstr("it can go on with 2 of its 3 ranks"));
  ReportCheckpoint("w1", elastic.id(), 9);
  ExitAll(elastic.id(), kRankExitStopped);
  EXPECT_EQ(jobs_.Get(high.id())->state(), v1::JOB_STATE_RUNNING);
  const v1::Job resumed = *jobs_.Get(elastic.id());
  EXPECT_EQ(resumed.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(resumed.world_size(), 2);
  EXPECT_EQ(resumed.resume_from().step(), 9);
}

TEST_F(JobManagerPreemptionTest, AJobThatWritesNoCheckpointsIsNeverPreempted) {
  jobs_.SetSchedulingConfig(TestPolicy(kPolicy));
  std::shared_ptr<FakeAgentLink> w1 = AddWorker("w1", 1);
  const v1::Job low = *jobs_.Submit(Spec(1), false);  // no checkpoint.dir
  const v1::Job high = *jobs_.Submit(Checkpointing(1, "high"), false);
  EXPECT_EQ(jobs_.Get(low.id())->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(jobs_.Get(high.id())->state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(w1->Cancels(), 0);
  ExitAll(low.id(), 0);
  EXPECT_EQ(jobs_.Get(high.id())->state(), v1::JOB_STATE_RUNNING);
}

TEST_F(JobManagerPreemptionTest, TurnedOffInThePolicyNothingIsPreempted) {
  jobs_.SetSchedulingConfig(TestPolicy(std::string(kPolicy) + "preemption: false\n"));
  std::shared_ptr<FakeAgentLink> w1 = AddWorker("w1", 1);
  const v1::Job low = *jobs_.Submit(Checkpointing(1, "low"), false);
  ASSERT_TRUE(jobs_.Submit(Checkpointing(1, "high"), false).ok());
  EXPECT_EQ(jobs_.Get(low.id())->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(w1->Cancels(), 0);
}

TEST_F(JobManagerPreemptionTest, RanksThatFinishedBeforeTheRequestReachedThemSucceed) {
  jobs_.SetSchedulingConfig(TestPolicy(kPolicy));
  AddWorker("w1", 2);
  const v1::Job low = *jobs_.Submit(Checkpointing(2, "low"), false);
  const v1::Job high = *jobs_.Submit(Checkpointing(2, "high"), false);
  ASSERT_EQ(jobs_.Get(low.id())->state(), v1::JOB_STATE_PREEMPTED);
  ExitAll(low.id(), 0);
  const v1::Job done = *jobs_.Get(low.id());
  EXPECT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_THAT(done.reason(), HasSubstr("finished before the request to stop"));
  EXPECT_EQ(jobs_.Get(high.id())->state(), v1::JOB_STATE_RUNNING);
}

TEST_F(JobManagerPreemptionTest, ARankStoppedByHandPreemptsItsJobWhichResumesAtOnce) {
  std::shared_ptr<FakeAgentLink> w1 = AddWorker("w1", 2);
  const v1::Job job = *jobs_.Submit(Checkpointing(2, "normal"), false);
  ReportCheckpoint("w1", job.id(), 40);
  Exit("w1", job.id(), 0, kRankExitStopped);
  v1::Job stopped = *jobs_.Get(job.id());
  EXPECT_EQ(stopped.state(), v1::JOB_STATE_PREEMPTED);
  EXPECT_THAT(stopped.reason(), HasSubstr("rank 0 on worker w1 checkpointed and "
                                          "stopped on a request to its process"));
  // Its peer is asked too, with the default class's grace.
  std::vector<v1::CancelRanks> asked = CancelsOf(*w1, job.id());
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_TRUE(asked[0].checkpoint_first());
  EXPECT_EQ(asked[0].grace_ms(), PriorityClass().grace_ms);
  Exit("w1", job.id(), 1, kRankExitStopped);
  const v1::Job resumed = *jobs_.Get(job.id());
  EXPECT_EQ(resumed.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(resumed.generation(), 2);
  EXPECT_EQ(resumed.restarts(), 0);
  EXPECT_EQ(resumed.resume_from().step(), 40);
}

TEST_F(JobManagerPreemptionTest, BorrowedSlotsGoBackToAUserWithinQuotaAndStayThere) {
  jobs_.SetSchedulingConfig(
      TestPolicy("users: {alice: {slots: 1, borrow: true}, bob: {slots: 2}}\n"));
  std::shared_ptr<FakeAgentLink> w1 = AddWorker("w1", 2);
  const v1::Job alices = *jobs_.Submit(Checkpointing(2, "normal"), false, "", "alice");
  ASSERT_EQ(jobs_.Get(alices.id())->state(), v1::JOB_STATE_RUNNING);
  const v1::Job bobs = *jobs_.Submit(Checkpointing(2, "normal"), false, "", "bob");
  v1::Job stopping = *jobs_.Get(alices.id());
  ASSERT_EQ(stopping.state(), v1::JOB_STATE_PREEMPTED);
  EXPECT_THAT(stopping.reason(), HasSubstr("borrowed slots beyond its quota"));
  ExitAll(alices.id(), kRankExitStopped);
  // Same class, and alice's job resumes before fresh ones: it still must
  // not take back what bob, within his quota, needs.
  EXPECT_EQ(jobs_.Get(bobs.id())->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(jobs_.Get(alices.id())->state(), v1::JOB_STATE_PREEMPTED);
  ExitAll(bobs.id(), 0);
  EXPECT_EQ(jobs_.Get(alices.id())->state(), v1::JOB_STATE_RUNNING);
}

TEST_F(JobManagerPreemptionTest, CancellingAPreemptedJobEndsItsStoppingRanks) {
  jobs_.SetSchedulingConfig(TestPolicy(kPolicy));
  std::shared_ptr<FakeAgentLink> w1 = AddWorker("w1", 1);
  const v1::Job low = *jobs_.Submit(Checkpointing(1, "low"), false);
  ASSERT_TRUE(jobs_.Submit(Checkpointing(1, "high"), false).ok());
  ASSERT_EQ(jobs_.Get(low.id())->state(), v1::JOB_STATE_PREEMPTED);
  ASSERT_TRUE(jobs_.Cancel(low.id(), "not needed").ok());
  EXPECT_EQ(jobs_.Get(low.id())->state(), v1::JOB_STATE_CANCELLED);
  std::vector<v1::CancelRanks> sent = CancelsOf(*w1, low.id());
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_FALSE(sent[1].checkpoint_first());  // now, not after a checkpoint
}

// After a coordinator restart the preempted job's ranks are asked again to
// checkpoint and stop, and those whose agent is not back yet keep their
// slots until the re-attach window ends.
TEST_F(JobManagerPreemptionTest, AfterARestartStoppingRanksAreAskedAgainAndKeepTheirSlots) {
  jobs_.SetSchedulingConfig(TestPolicy(kPolicy));
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  const v1::Job low = *jobs_.Submit(Checkpointing(2, "low"), false);
  const v1::Job high = *jobs_.Submit(Checkpointing(2, "high"), false);
  ASSERT_EQ(jobs_.Get(low.id())->state(), v1::JOB_STATE_PREEMPTED);
  ASSERT_TRUE(jobs_.Flush().ok());

  EventHub events;
  Rendezvous rendezvous;
  JobManager restarted(clock_, events, rendezvous, store_, 5'000, 1'000);
  restarted.SetSchedulingConfig(TestPolicy(kPolicy));
  ASSERT_TRUE(restarted.Recover().ok());
  restarted.StartReattachWindow();
  // w1 is back (now with 2 slots) with rank 0, still checkpointing; w2,
  // where rank 1 may be writing too, is not back yet.
  v1::RegisterRequest reg;
  reg.set_name("w1");
  reg.set_slots(2);
  v1::RankStatus* still = reg.add_ranks();
  still->set_job_id(low.id());
  still->set_generation(1);
  still->set_rank(0);
  still->set_running(true);
  auto link = std::make_shared<FakeAgentLink>();
  ASSERT_TRUE(restarted.RegisterWorker(reg, link).ok());
  // Asked again, with its class's grace.
  std::vector<v1::CancelRanks> asked = CancelsOf(*link, low.id());
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_TRUE(asked[0].checkpoint_first());
  EXPECT_EQ(asked[0].grace_ms(), 30'000);
  EXPECT_EQ(restarted.Get(low.id())->pending_reason(),
            "waiting for 2 ranks of generation 1 to checkpoint and stop");
  EXPECT_THAT(restarted.Get(high.id())->pending_reason(),
              HasSubstr("waiting for slots of stopping jobs"));
  v1::RankStatus exit;
  exit.set_job_id(low.id());
  exit.set_generation(1);
  exit.set_exit_code(kRankExitStopped);
  ASSERT_TRUE(restarted.OnRankStatus("w1", exit).ok());
  EXPECT_EQ(restarted.Get(high.id())->state(), v1::JOB_STATE_RUNNING);
  // Rank 1 may still be writing: the job does not resume from an older
  // checkpoint meanwhile.
  EXPECT_EQ(restarted.Get(low.id())->state(), v1::JOB_STATE_PREEMPTED);
  EXPECT_EQ(restarted.Get(low.id())->pending_reason(),
            "waiting for 1 rank of generation 1 to checkpoint and stop");
  // Its agent never comes back: past the window the rank is lost.
  clock_.AdvanceMs(60'000);
  restarted.Heartbeat("w1");
  restarted.CheckLeases();
  const v1::Job given_up = *restarted.Get(low.id());
  EXPECT_EQ(given_up.ranks(1).state(), v1::RANK_STATE_LOST);
  EXPECT_THAT(given_up.ranks(1).message(), HasSubstr("did not come back"));
  EXPECT_EQ(given_up.state(), v1::JOB_STATE_PREEMPTED);
  EXPECT_THAT(given_up.pending_reason(), Not(HasSubstr("to checkpoint and stop")));
}

}  // namespace
}  // namespace trainctl::coordinator
