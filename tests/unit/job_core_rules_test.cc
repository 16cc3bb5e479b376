// More of JobCore's fault-tolerance and scheduling rules as tables, with no
// fakes: hang bounds, re-attach after a coordinator restart, preemption,
// spares and growing back. job_core_test has the lost worker, restarts,
// in-place recovery, the catalog and retention.

#include "absl/strings/match.h"
#include "common/rank_exit.h"
#include "coordinator/scheduling_config.h"
#include "job_core_fixture.h"

namespace trainctl::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// --- Hangs: each phase has its bound, and the rank furthest behind is named.

struct HangCase {
  std::string name;
  std::string fault_tolerance;
  std::string phase;  // rank 0's, which is behind; rank 1 waits in all-reduce
  int64_t step;
  int64_t bound_ms;
  std::string reason;
};

class HangTest : public JobCoreTest,
                 public ::testing::WithParamInterface<HangCase> {};

TEST_P(HangTest, AStallIsAHangFromItsPhasesBoundOn) {
  const HangCase& c = GetParam();
  Register("w1");
  Register("w2");
  const std::string id = Submit(TwoRankSpec(c.fault_tolerance));
  // Both report every second; neither moves.
  auto report = [&] {
    Progress("w1", id, 0, c.step, 3, c.phase);
    Progress("w2", id, 1, c.step, 4, "all-reduce");
  };
  report();
  core_.TakeEffects();
  for (int64_t ms = 1'000; ms < c.bound_ms; ms += 1'000) {
    At(ms);
    report();
    core_.CheckLeases();
  }
  At(c.bound_ms - 1);
  report();
  core_.CheckLeases();
  ASSERT_EQ(Job(id).state(), v1::JOB_STATE_RUNNING) << "a millisecond early";
  core_.TakeEffects();

  At(c.bound_ms);
  report();
  core_.CheckLeases();
  const Effects effects = core_.TakeEffects();
  const v1::Job job = Job(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_RESTARTING);
  EXPECT_EQ(job.restarts(), 1);
  EXPECT_THAT(job.reason(), HasSubstr(c.reason));
  EXPECT_THAT(Messages(effects.messages), ElementsAre("w1: cancel", "w2: cancel"));
  EXPECT_TRUE(InOrder(Describe(effects.changes),
                      {"end job-1 g1", "event 3 -> JOB_STATE_RESTARTING"}))
      << ::testing::PrintToString(Describe(effects.changes));
}

INSTANTIATE_TEST_SUITE_P(
    JobCore, HangTest,
    ::testing::Values(
        HangCase{"AComputeStallPastHangTimeout",
                 "{hang_timeout_s: 5, max_restarts: 1}", "compute", 10, 5'000,
                 "rank 0 on worker w1 stuck in compute at step 10 for 5 s, last "
                 "report 0 s ago (rank 1 waits in all-reduce #4 at step 10)"},
        // The others waiting for an evaluation, a checkpoint or the first
        // step that long is no hang; past the phase's own bound it is.
        HangCase{"AnEvaluationHasItsOwnBound",
                 "{hang_timeout_s: 5, eval_timeout_s: 30, max_restarts: 1}",
                 "evaluation", 10, 30'000,
                 "rank 0 on worker w1 stuck in evaluation at step 10 for 30 s "
                 "(over eval_timeout_s 30)"},
        HangCase{"ACheckpointHasItsOwnBound",
                 "{hang_timeout_s: 5, checkpoint_timeout_s: 30, max_restarts: 1}",
                 "checkpoint", 10, 30'000,
                 "rank 0 on worker w1 stuck in checkpoint at step 10 for 30 s "
                 "(over checkpoint_timeout_s 30)"},
        HangCase{"TheFirstStepHasItsOwnBound",
                 "{hang_timeout_s: 5, first_step_timeout_s: 30, max_restarts: 1}",
                 "compute", 0, 30'000,
                 "rank 0 on worker w1 stuck in compute at step 0 for 30 s "
                 "(over first_step_timeout_s 30)"}),
    [](const auto& info) { return info.param.name; });

TEST_F(JobCoreTest, ProgressThatMovesIsNoHang) {
  Register("w1");
  Register("w2");
  const std::string id = Submit(TwoRankSpec("{hang_timeout_s: 5}"));
  for (int step = 1; step <= 5; ++step) {
    At(step * 3'000);
    Progress("w1", id, 0, step, step, "compute");
    Progress("w2", id, 1, step, step, "compute");
    core_.CheckLeases();
  }
  EXPECT_EQ(Job(id).state(), v1::JOB_STATE_RUNNING);
}

// --- Re-attach: after a coordinator restart, a RUNNING job's agents have
// the grace period (2 x lease + 5 s, from when the coordinator serves) to
// re-adopt its ranks; a rank whose agent does not come back restarts the
// generation, and exits heard in the registrations count as exits.

struct ReattachCase {
  std::string name;
  bool w2_returns;
  bool exited_meanwhile;  // the ranks exited 0 while the coordinator was down
  v1::JobState state;     // just past the grace period
  std::string reason;
};

class ReattachTest : public JobCoreTest,
                     public ::testing::WithParamInterface<ReattachCase> {};

TEST_P(ReattachTest, TheJobGoesOnWithTheRanksThatCameBack) {
  const ReattachCase& c = GetParam();
  // The record a first coordinator left: job-1 RUNNING on w1 and w2.
  v1::Job stored;
  {
    JobCore first(kLeaseMs, 1'000);
    first.SetNow(kStart);
    for (const char* w : {"w1", "w2"}) {
      v1::RegisterRequest info;
      info.set_name(w);
      info.set_slots(1);
      ASSERT_TRUE(first.RegisterWorker(info, nullptr).ok());
    }
    v1::Job job;
    *job.mutable_spec() = *ParseJobSpec(TwoRankSpec("{max_restarts: 2}"));
    ASSERT_TRUE(first.ResolvePriority(job.mutable_spec(), "").ok());
    stored = *first.Get(first.Admit(*first.Reserve(std::move(job))).id());
    ASSERT_EQ(stored.state(), v1::JOB_STATE_RUNNING);
  }
  JobCore::Recovered recovered;
  recovered.next_job_number = 2;
  recovered.jobs.push_back({stored, /*last_seq=*/2, {}, {}});
  At(60'000);  // the coordinator came back a minute later
  ASSERT_TRUE(core_.Restore(std::move(recovered)).ok());
  At(63'000);  // and serves from here
  core_.StartReattachWindow();
  core_.TakeEffects();
  const int64_t grace = 2 * kLeaseMs + 5'000;

  auto come_back = [&](const std::string& worker, int rank) {
    v1::RankStatus listed;
    listed.set_job_id("job-1");
    listed.set_generation(1);
    listed.set_rank(rank);
    listed.set_running(true);
    std::vector<v1::RankStatus> ranks{listed};
    if (c.exited_meanwhile) {
      // As the agent lists it: the rank not reaped yet, and its exit.
      v1::RankStatus exited = listed;
      exited.set_running(false);
      ranks.push_back(exited);
    }
    RegisterWith(worker, ranks);
    if (c.exited_meanwhile) {
      ASSERT_TRUE(core_.OnRankStatus(worker, ranks.back()).ok());
    }
  };
  At(64'000);
  come_back("w1", 0);
  At(63'000 + grace - 1);
  if (c.w2_returns) come_back("w2", 1);
  core_.Heartbeat("w1");
  core_.CheckLeases();
  if (!c.exited_meanwhile) {
    EXPECT_EQ(Job("job-1").state(), v1::JOB_STATE_RUNNING) << "inside the grace";
  }
  At(63'000 + grace + 1);
  core_.Heartbeat("w1");
  if (c.w2_returns) core_.Heartbeat("w2");
  core_.CheckLeases();
  const v1::Job job = Job("job-1");
  EXPECT_EQ(job.state(), c.state);
  EXPECT_EQ(job.generation(), 1);
  // The coordinator's restart is not the job's failure: never counted.
  EXPECT_EQ(job.restarts(), 0);
  EXPECT_THAT(job.reason(), HasSubstr(c.reason));
}

INSTANTIATE_TEST_SUITE_P(
    JobCore, ReattachTest,
    ::testing::Values(
        ReattachCase{"BothAgentsReadoptTheirRanks", true, false,
                     v1::JOB_STATE_RUNNING, ""},
        ReattachCase{"ARankNotReadoptedRestartsTheGeneration", false, false,
                     v1::JOB_STATE_RESTARTING,
                     "not every rank of generation 1 came back within 25 s of "
                     "the coordinator restarting"},
        ReattachCase{"ExitsDuringTheOutageEndTheJob", true, true,
                     v1::JOB_STATE_SUCCEEDED, ""}),
    [](const auto& info) { return info.param.name; });

// --- Preemption: a higher class stops a lower job that checkpoints, which
// waits as PREEMPTED; a job without checkpoints, or a policy without
// preemption, is never stopped.

constexpr char kTwoClasses[] =
    "classes: {low: {value: 0, grace_seconds: 30}, high: 10}\n"
    "default_class: low\n";

std::string OneRank(const std::string& priority, bool checkpoints) {
  std::string spec =
      "name: t\nranks: 1\nmodel: mlp\ndata: {train_images: a, train_labels: b}\n"
      "training: {batch_size: 8}\nfault_tolerance: {max_restarts: 0}\n"
      "priority: " + priority + "\n";
  if (checkpoints) spec += "checkpoint: {dir: /ckpt, every_steps: 1000}\n";
  return spec;
}

struct PreemptionCase {
  std::string name;
  std::string policy;
  bool victim_checkpoints;
  v1::JobState victim;  // after the higher job's submission
};

class PreemptionTest : public JobCoreTest,
                       public ::testing::WithParamInterface<PreemptionCase> {};

TEST_P(PreemptionTest, AHigherClassTakesTheSlotOnlyWhereItMay) {
  const PreemptionCase& c = GetParam();
  absl::StatusOr<SchedulingConfig> policy = ParseSchedulingConfig(c.policy, "test.yaml");
  ASSERT_TRUE(policy.ok()) << policy.status();
  core_.SetSchedulingConfig(*policy);
  Register("w1");
  const std::string low = Submit(OneRank("low", c.victim_checkpoints));
  ASSERT_EQ(Job(low).state(), v1::JOB_STATE_RUNNING);
  core_.TakeEffects();
  const std::string high = Submit(OneRank("high", true));
  const Effects effects = core_.TakeEffects();

  EXPECT_EQ(Job(low).state(), c.victim);
  EXPECT_EQ(Job(high).state(), v1::JOB_STATE_QUEUED);
  if (c.victim == v1::JOB_STATE_PREEMPTED) {
    EXPECT_THAT(Job(low).reason(),
                HasSubstr("preempted by job " + high + " (priority 10 > 0)"));
    EXPECT_THAT(Job(high).pending_reason(), HasSubstr("preempting job " + low));
    // Its rank is asked to checkpoint first, within the class's grace.
    ASSERT_THAT(Messages(effects.messages), ElementsAre("w1: cancel"));
    const v1::CancelRanks& asked = effects.messages[0].message.cancel();
    EXPECT_EQ(asked.job_id(), low);
    EXPECT_TRUE(asked.checkpoint_first());
    EXPECT_EQ(asked.grace_ms(), 30'000);
  } else {
    EXPECT_TRUE(Messages(effects.messages).empty());
  }
}

INSTANTIATE_TEST_SUITE_P(
    JobCore, PreemptionTest,
    ::testing::Values(
        PreemptionCase{"AJobThatCheckpointsIsStopped", kTwoClasses, true,
                       v1::JOB_STATE_PREEMPTED},
        PreemptionCase{"AJobWithoutCheckpointsIsNever", kTwoClasses, false,
                       v1::JOB_STATE_RUNNING},
        PreemptionCase{"NotWhenThePolicyTurnsItOff",
                       std::string(kTwoClasses) + "preemption: false\n", true,
                       v1::JOB_STATE_RUNNING}),
    [](const auto& info) { return info.param.name; });

TEST_F(JobCoreTest, APreemptedJobResumesFromItsCheckpointWithoutARestart) {
  core_.SetSchedulingConfig(*ParseSchedulingConfig(kTwoClasses, "test.yaml"));
  Register("w1");
  const std::string low = Submit(OneRank("low", true));
  const std::string high = Submit(OneRank("high", true));
  ASSERT_EQ(Job(low).state(), v1::JOB_STATE_PREEMPTED);
  Checkpoint("w1", low, 1, 21, 1);
  Exited("w1", low, 1, 0, kRankExitStopped);
  EXPECT_EQ(Job(high).state(), v1::JOB_STATE_RUNNING);
  core_.TakeEffects();
  v1::RankStatus done;
  done.set_job_id(high);
  done.set_generation(1);
  ASSERT_TRUE(core_.OnRankStatus("w1", done).ok());
  const Effects effects = core_.TakeEffects();
  const v1::Job resumed = Job(low);
  EXPECT_EQ(resumed.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(resumed.generation(), 2);
  EXPECT_EQ(resumed.restarts(), 0);  // a preemption is not a failure
  EXPECT_EQ(resumed.resume_from().step(), 21);
  // The ended job's generation is cancelled on its worker (its rank has
  // exited: a no-op there), then the slot goes to the preempted job.
  ASSERT_THAT(Messages(effects.messages), ElementsAre("w1: cancel", "w1: assign"));
  EXPECT_EQ(effects.messages[0].message.cancel().job_id(), high);
  EXPECT_EQ(effects.messages[1].message.assign().ranks(0).resume().step(), 21);
}

// --- Spares and growing back.

TEST_F(JobCoreTest, ALostRankIsReplacedOnTheJobsSpare) {
  for (int w = 1; w <= 5; ++w) Register("w" + std::to_string(w));
  const std::string id = Submit(
      "name: t\nranks: 3\nmodel: mlp\ndata: {train_images: a, train_labels: b}\n"
      "training: {batch_size: 24}\ncheckpoint: {dir: /ckpt, every_steps: 10}\n"
      "fault_tolerance: {in_place: true, min_workers: 2, spares: 2}\n");
  const v1::Job started = Job(id);
  for (const v1::RankInfo& rank : started.ranks()) {
    Running(rank.worker(), id, rank.rank(), "compute");
  }
  EXPECT_THAT(started.spare_workers(), ElementsAre("w4", "w5"));
  core_.TakeEffects();

  core_.WorkerDisconnected("w2", nullptr);
  const Effects effects = core_.TakeEffects();
  const v1::Job job = Job(id);
  EXPECT_EQ(job.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(job.world_size(), 3);
  EXPECT_EQ(job.ranks(2).worker(), "w4");  // the first spare; rank 2 moved down
  EXPECT_THAT(job.spare_workers(), ElementsAre("w5"));
  bool joins = false;
  for (const AgentMessage& m : effects.messages) {
    if (m.worker != "w4") continue;
    for (const v1::RankAssignment& a : m.message.assign().ranks()) {
      joins |= a.joins_in_place();
    }
  }
  EXPECT_TRUE(joins) << "the replacement joins the survivors' group";
}

TEST_F(JobCoreTest, AnElasticJobGrowsAtItsNextCheckpointWhenASlotFrees) {
  Register("w1");
  Register("w2");
  const std::string id = Submit(
      "name: t\nranks: 2\nmodel: mlp\ndata: {train_images: a, train_labels: b}\n"
      "training: {batch_size: 24}\ncheckpoint: {dir: /ckpt, every_steps: 10}\n"
      "fault_tolerance: {max_workers: 3, elastic: true}\n");
  Checkpoint("w1", id, 1, 10, 1);
  EXPECT_EQ(Job(id).state(), v1::JOB_STATE_RUNNING) << "no free slot yet";
  Register("w3");
  Checkpoint("w1", id, 1, 20, 2);
  EXPECT_EQ(Job(id).state(), v1::JOB_STATE_RESTARTING);
  EXPECT_THAT(Job(id).reason(), HasSubstr("growing from 2 to 3 ranks"));
  EXPECT_EQ(Job(id).restarts(), 0);
  Exited("w1", id, 1, 0);
  core_.TakeEffects();
  Exited("w2", id, 1, 1);
  const Effects effects = core_.TakeEffects();
  const v1::Job grown = Job(id);
  EXPECT_EQ(grown.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(grown.world_size(), 3);
  EXPECT_THAT(Messages(effects.messages),
              ::testing::UnorderedElementsAre("w1: assign", "w2: assign", "w3: assign"));
  for (const AgentMessage& m : effects.messages) {
    EXPECT_EQ(m.message.assign().ranks(0).resume().step(), 20);
  }
}

// --- Which exit caused a restart: a rank that dies takes its peers'
// collectives with it, and whichever agent reports first ends the
// generation; a peer's "reset by peer" is a symptom, the other the cause.

struct ExitOrderCase {
  std::string name;
  std::string first, second;  // the exits' messages: rank 1's, then rank 0's
  std::string restart;  // what the restart's transition names
  bool noted;           // the job's log names the later exit as the cause
};

class ExitOrderTest : public JobCoreTest,
                      public ::testing::WithParamInterface<ExitOrderCase> {};

TEST_P(ExitOrderTest, TheRestartNamesTheCauseNotTheSymptom) {
  const ExitOrderCase& c = GetParam();
  Register("w1");
  Register("w2");
  const std::string id = Submit(TwoRankSpec("{max_restarts: 2}"));
  auto exit = [&](const std::string& worker, int rank, int code,
                  const std::string& message) {
    v1::RankStatus status;
    status.set_job_id(id);
    status.set_generation(1);
    status.set_rank(rank);
    status.set_exit_code(code);
    status.set_message(message);
    return core_.OnRankStatus(worker, status);
  };
  ASSERT_TRUE(exit("w2", 1, 1, c.first).ok());
  At(3);  // the other agent's report, 3 ms later
  ASSERT_TRUE(exit("w1", 0, 4, c.second).ok());
  // Re-sent after a reconnect: refused (generation 1 is over), no new note.
  EXPECT_FALSE(exit("w1", 0, 4, c.second).ok());
  const v1::Job job = Job(id);
  std::string restart;
  for (const v1::Transition& t : job.transitions()) {
    if (t.to() == v1::JOB_STATE_RESTARTING) restart = t.reason();
  }
  EXPECT_THAT(restart, HasSubstr(c.restart));
  int notes = 0;
  for (const Change& change : core_.TakeEffects().changes) {
    const auto* appended = std::get_if<EventAppended>(&change);
    if (appended != nullptr && appended->event.has_log() &&
        absl::StrContains(appended->event.log().text(), "most likely a symptom")) {
      ++notes;
      EXPECT_EQ(appended->event.log().text(),
                "[trainctl] rank 0 on worker w1 exited with code 4: " + c.second +
                    ", 3 ms after a peer's exit ended generation 1: that exit "
                    "was most likely a symptom");
    }
  }
  EXPECT_EQ(notes, c.noted ? 1 : 0);
  // Both old ranks stopped, so generation 2 started at once.
  EXPECT_EQ(job.generation(), 2);
}

INSTANTIATE_TEST_SUITE_P(
    JobCore, ExitOrderTest,
    ::testing::Values(
        ExitOrderCase{"TheSymptomHeardFirstIsCorrected",
                      "Read error [127.0.0.1]:25230: Connection reset by peer",
                      "fault hook: dying halfway through a checkpoint",
                      "rank 1 on worker w2 exited with code 1", true},
        ExitOrderCase{"TheCauseHeardFirstStays",
                      "fault hook: dying halfway through a checkpoint",
                      "Read error [127.0.0.1]:25230: Connection reset by peer",
                      "rank 1 on worker w2 exited with code 1: fault hook", false},
        ExitOrderCase{"TwoFailuresOfTheirOwnKeepTheFirst", "out of memory",
                      "fault hook: dying halfway through a checkpoint",
                      "rank 1 on worker w2 exited with code 1: out of memory",
                      false},
        ExitOrderCase{"TwoSymptomsKeepTheFirst",
                      "Connection reset by peer", "Connection closed by peer",
                      "rank 1 on worker w2 exited with code 1", false}),
    [](const auto& info) { return info.param.name; });

// --- The core's own log lines are effects too (the shell writes them).

TEST_F(JobCoreTest, ALostWorkerIsSaidInTheLogItLeaves) {
  Register("w1");
  const std::vector<LogLine> registered = core_.TakeEffects().log;
  ASSERT_EQ(registered.size(), 1u);
  EXPECT_EQ(registered[0].text, "worker w1 registered: 1 slots at w1.local");
  core_.WorkerDisconnected("w1", nullptr);
  const std::vector<LogLine> lost = core_.TakeEffects().log;
  ASSERT_EQ(lost.size(), 1u);
  EXPECT_EQ(lost[0].level, LogLevel::kWarning);
  EXPECT_THAT(lost[0].text, HasSubstr("worker w1 lost: "));
}

}  // namespace
}  // namespace trainctl::coordinator
