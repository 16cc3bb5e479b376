// JobManager rules from the hardening review: deterministic rank failures
// are not retried, ranks show how they ended, watchers are shown only
// durable events, resumes must fit the checkpoint, and slots are bounded.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/rank_exit.h"
#include "coordinator/resume_check.h"
#include "common/spec.h"
#include "tests/unit/job_manager_fixture.h"

namespace trainctl::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Retrying(int ranks) {
  return Spec(ranks, "fault_tolerance: {max_restarts: 3}\n");
}

TEST_F(JobManagerTest, ConfigurationErrorFailsTheJobWithoutRestarts) {
  AddWorker("w1", 1);
  v1::Job job = *jobs_.Submit(Retrying(1), false);
  Exit("w1", job.id(), 0, kRankExitConfigError,
       "data.label_column: no column named 'nope' in the header of /d/x.csv");
  v1::Job failed = *jobs_.Get(job.id());
  EXPECT_EQ(failed.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(failed.restarts(), 0);
  EXPECT_THAT(failed.reason(), HasSubstr("not retried"));
  EXPECT_THAT(failed.reason(), HasSubstr("no column named 'nope'"));
}

TEST_F(JobManagerTest, ConfigurationErrorAfterAPeersExitStillFailsTheJob) {
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  v1::Job job = *jobs_.Submit(Retrying(2), false);
  // The peer notices first (its collective broke) and exits 1: a restart.
  Exit("w2", job.id(), 1, 1, "connection closed by peer");
  EXPECT_EQ(jobs_.Get(job.id())->state(), v1::JOB_STATE_RESTARTING);
  Exit("w1", job.id(), 0, kRankExitConfigError, "data.train_path: missing");
  v1::Job failed = *jobs_.Get(job.id());
  EXPECT_EQ(failed.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.reason(), HasSubstr("data.train_path: missing"));
}

TEST_F(JobManagerTest, RetryableExitStillRestarts) {
  AddWorker("w1", 1);
  v1::Job job = *jobs_.Submit(Retrying(1), false);
  Exit("w1", job.id(), 0, -9);
  EXPECT_EQ(jobs_.Get(job.id())->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(jobs_.Get(job.id())->restarts(), 1);
}

TEST(RankExitTest, ClassifiesStatusCodes) {
  EXPECT_EQ(RankExitCode(absl::OkStatus()), 0);
  EXPECT_EQ(RankExitCode(absl::InvalidArgumentError("x")), kRankExitConfigError);
  EXPECT_EQ(RankExitCode(absl::NotFoundError("x")), kRankExitConfigError);
  EXPECT_EQ(RankExitCode(absl::InternalError("x")), 1);
  EXPECT_EQ(RankExitCode(absl::ResourceExhaustedError("x")), 1);
  EXPECT_EQ(RankExitCode(absl::UnavailableError("x")), 1);
}

TEST_F(JobManagerTest, RanksOfACancelledJobShowTheirExit) {
  AddWorker("w1", 1);
  v1::Job job = *jobs_.Submit(Spec(1), false);
  ASSERT_TRUE(jobs_.Cancel(job.id(), "").ok());
  Exit("w1", job.id(), 0, -15);
  v1::Job cancelled = *jobs_.Get(job.id());
  ASSERT_EQ(cancelled.ranks_size(), 1);
  EXPECT_EQ(cancelled.ranks(0).state(), v1::RANK_STATE_EXITED);
  EXPECT_EQ(cancelled.ranks(0).exit_code(), -15);
}

TEST_F(JobManagerTest, RanksOfALostWorkerAreLost) {
  auto link = AddWorker("w1", 1);
  v1::Job job = *jobs_.Submit(Spec(1), false);
  jobs_.WorkerDisconnected("w1", link.get());
  v1::Job failed = *jobs_.Get(job.id());
  EXPECT_EQ(failed.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(failed.ranks(0).state(), v1::RANK_STATE_LOST);
  EXPECT_THAT(failed.ranks(0).message(), HasSubstr("w1 was lost"));
}

TEST_F(JobManagerTest, SlotsAreBounded) {
  v1::RegisterRequest reg;
  reg.set_name("greedy");
  reg.set_collective_host("127.0.0.1");
  reg.set_slots(kMaxSlotsPerWorker + 1);
  absl::Status refused =
      jobs_.RegisterWorker(reg, std::make_shared<FakeAgentLink>());
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("register.slots"));
  EXPECT_TRUE(jobs_.Workers().empty());
  reg.set_slots(kMaxSlotsPerWorker);
  EXPECT_TRUE(jobs_.RegisterWorker(reg, std::make_shared<FakeAgentLink>()).ok());
}

// --- watchers see only what is durable ---

// Holds grouped writes back, as the group commit does for up to its window,
// and can lose them, as a kill -9 does.
class HoldingStore : public InMemoryJobStore {
 public:
  absl::Status Write(const JobWrite& write, Durability d) override {
    if (d == Durability::kGrouped) {
      held_.push_back(write);
      return absl::OkStatus();
    }
    Commit();  // an immediate write commits everything before it
    return InMemoryJobStore::Write(write, d);
  }
  void WhenDurable(std::function<void()> done) override {
    if (held_.empty()) {
      done();
    } else {
      waiting_.push_back(std::move(done));
    }
  }
  void Commit() {
    for (const JobWrite& w : held_) {
      ASSERT_TRUE(InMemoryJobStore::Write(w, Durability::kImmediate).ok());
    }
    held_.clear();
    for (auto& done : waiting_) done();
    waiting_.clear();
  }
  void Crash() {
    held_.clear();
    waiting_.clear();
  }

 private:
  std::vector<JobWrite> held_;
  std::vector<std::function<void()>> waiting_;
};

std::vector<int64_t> Seqs(EventHub& hub, const std::string& job) {
  bool closed = false;
  std::vector<int64_t> out;
  const std::vector<v1::JobEvent> events = *hub.WaitForEvents(job, 1, 0, &closed);
  for (const v1::JobEvent& e : events) {
    out.push_back(e.seq());
  }
  return out;
}

class DurableEventsTest : public ::testing::Test {
 protected:
  std::shared_ptr<FakeAgentLink> Register(JobManager& jobs) {
    auto link = std::make_shared<FakeAgentLink>();
    v1::RegisterRequest reg;
    reg.set_name("w1");
    reg.set_slots(1);
    reg.set_collective_host("127.0.0.1");
    EXPECT_TRUE(jobs.RegisterWorker(reg, link).ok());
    return link;
  }
  static v1::RankMetrics Metric(const std::string& job, int64_t step) {
    v1::RankMetrics m;
    m.set_job_id(job);
    m.set_generation(1);
    m.set_seq(step);
    m.mutable_point()->set_kind("train");
    m.mutable_point()->set_step(step);
    return m;
  }

  FakeClock clock_;
  Rendezvous rendezvous_;
  HoldingStore store_;
};

TEST_F(DurableEventsTest, AMetricReachesWatchersOnlyOnceCommitted) {
  EventHub hub;
  JobManager jobs(clock_, hub, rendezvous_, store_, 5'000, 1'000);
  Register(jobs);
  v1::Job job = *jobs.Submit(Spec(1), false);
  EXPECT_EQ(Seqs(hub, job.id()), (std::vector<int64_t>{1, 2}));  // transitions
  ASSERT_TRUE(jobs.OnRankMetrics("w1", Metric(job.id(), 5)).ok());
  EXPECT_EQ(Seqs(hub, job.id()), (std::vector<int64_t>{1, 2}));
  store_.Commit();
  EXPECT_EQ(Seqs(hub, job.id()), (std::vector<int64_t>{1, 2, 3}));
}

TEST_F(DurableEventsTest, ASeqLostInACrashWasNeverShownAndIsReusedOnce) {
  EventHub hub;
  JobManager jobs(clock_, hub, rendezvous_, store_, 5'000, 1'000);
  Register(jobs);
  v1::Job job = *jobs.Submit(Spec(1), false);
  ASSERT_TRUE(jobs.OnRankMetrics("w1", Metric(job.id(), 5)).ok());
  const std::vector<int64_t> shown = Seqs(hub, job.id());
  store_.Crash();  // kill -9 inside the group-commit window

  EventHub hub2;
  Rendezvous rendezvous2;
  JobManager restarted(clock_, hub2, rendezvous2, store_, 5'000, 1'000);
  ASSERT_TRUE(restarted.Recover().ok());
  v1::Job after = *restarted.Get(job.id());
  EXPECT_EQ(after.state(), v1::JOB_STATE_RUNNING);  // awaiting its rank
  ASSERT_TRUE(restarted.Cancel(job.id(), "").ok());  // immediate: seq 3
  // Seq 3 is now the cancellation; no watcher was ever shown another seq 3.
  EXPECT_EQ(shown, (std::vector<int64_t>{1, 2}));
  bool closed = false;
  std::vector<v1::JobEvent> events = *hub2.WaitForEvents(job.id(), 3, 0, &closed);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].transition().to(), v1::JOB_STATE_CANCELLED);
  EXPECT_TRUE(closed);
}

TEST_F(DurableEventsTest, AFinishedJobsStreamClosesOnlyAfterItsLastEvent) {
  EventHub hub;
  JobManager jobs(clock_, hub, rendezvous_, store_, 5'000, 1'000);
  Register(jobs);
  v1::Job job = *jobs.Submit(Spec(1), false);
  ASSERT_TRUE(jobs.OnRankMetrics("w1", Metric(job.id(), 5)).ok());
  v1::RankStatus exit;
  exit.set_job_id(job.id());
  exit.set_generation(1);
  exit.set_exit_code(0);
  ASSERT_TRUE(jobs.OnRankStatus("w1", exit).ok());  // immediate, after it
  bool closed = false;
  std::vector<v1::JobEvent> events = *hub.WaitForEvents(job.id(), 1, 0, &closed);
  EXPECT_EQ(events.size(), 4u);
  EXPECT_TRUE(closed);
}

// --- resuming another job's checkpoint ---

TEST(ResumeCheckTest, NamesTheFirstDifference) {
  const std::string base =
      "name: a\nmodel: {type: mlp, hidden: [32]}\n"
      "data: {train_images: /d/a, train_labels: /d/b}\n"
      "training: {batch_size: 64}\n";
  v1::JobSpec from = *ParseJobSpec(base);
  EXPECT_TRUE(CheckResumeCompatible(from, "job-1", from).ok());

  v1::JobSpec wider = *ParseJobSpec(
      "name: a\nmodel: {type: mlp, hidden: [64]}\n"
      "data: {train_images: /d/a, train_labels: /d/b}\n"
      "training: {batch_size: 64}\n");
  absl::Status model = CheckResumeCompatible(from, "job-1", wider);
  EXPECT_EQ(model.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(model.message()),
              HasSubstr("model.hidden: job-1 had [32], this spec has [64]"));

  v1::JobSpec batch = *ParseJobSpec(
      "name: a\nmodel: {type: mlp, hidden: [32]}\n"
      "data: {train_images: /d/a, train_labels: /d/b}\n"
      "training: {batch_size: 32, grad_accum_steps: 2}\n");
  EXPECT_TRUE(CheckResumeCompatible(from, "job-1", batch).ok());  // 32 x 2
  batch.mutable_training()->set_grad_accum_steps(1);
  EXPECT_THAT(std::string(CheckResumeCompatible(from, "job-1", batch).message()),
              HasSubstr("training.batch_size x grad_accum_steps"));

  v1::JobSpec data = from;
  data.mutable_data()->set_train_images("/d/other");
  EXPECT_THAT(std::string(CheckResumeCompatible(from, "job-1", data).message()),
              HasSubstr("data.train_images"));
  v1::JobSpec eval = from;
  eval.mutable_data()->set_eval_images("/d/eval");  // evaluation may change
  EXPECT_TRUE(CheckResumeCompatible(from, "job-1", eval).ok());

  // The images' size is the model's input; their augmentation may change.
  v1::JobSpec resized = from;
  resized.mutable_data()->mutable_transforms()->add_resize(32);
  resized.mutable_data()->mutable_transforms()->add_resize(32);
  EXPECT_THAT(std::string(CheckResumeCompatible(from, "job-1", resized).message()),
              HasSubstr("data.transforms.resize: job-1 had [], this spec has [32, 32]"));
  v1::JobSpec cropped = from;
  cropped.mutable_data()->mutable_transforms()->mutable_random_crop()->add_size(20);
  cropped.mutable_data()->mutable_transforms()->mutable_random_crop()->add_size(20);
  EXPECT_THAT(std::string(CheckResumeCompatible(from, "job-1", cropped).message()),
              HasSubstr("data.transforms.random_crop.size"));
  v1::JobSpec flipped = from;
  flipped.mutable_data()->mutable_transforms()->set_horizontal_flip(true);
  flipped.mutable_data()->mutable_transforms()->mutable_random_crop()->set_padding(4);
  EXPECT_TRUE(CheckResumeCompatible(from, "job-1", flipped).ok());
}

TEST_F(JobManagerTest, SubmitRefusesAResumeThatDoesNotFit) {
  AddWorker("w1", 1);
  v1::Job first = *jobs_.Submit(
      Spec(1, "checkpoint: {dir: /ckpt}\nfault_tolerance: {max_restarts: 0}\n"),
      false);
  v1::RankCheckpoint c;
  c.set_job_id(first.id());
  c.set_generation(1);
  c.mutable_checkpoint()->set_step(10);
  c.mutable_checkpoint()->set_path("/ckpt/" + first.id() + "/step-10.ckpt");
  ASSERT_TRUE(jobs_.OnRankCheckpoint("w1", c).ok());
  absl::StatusOr<v1::Job> bigger = jobs_.Submit(Spec(2), false, first.id());
  EXPECT_EQ(bigger.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bigger.status().message()),
              HasSubstr("training.batch_size x grad_accum_steps"));
  EXPECT_EQ(jobs_.List({}).size(), 1u);  // nothing queued
  EXPECT_TRUE(jobs_.Submit(Spec(1), false, first.id()).ok());
}


// --- the checkpoint catalog ---

v1::RankCheckpoint CheckpointAt(const std::string& job, const std::string& path) {
  v1::RankCheckpoint c;
  c.set_job_id(job);
  c.set_generation(1);
  c.mutable_checkpoint()->set_step(10);
  c.mutable_checkpoint()->set_path(path);
  return c;
}

const char kCheckpointed[] =
    "checkpoint: {dir: /ckpt}\nfault_tolerance: {max_restarts: 0}\n";

TEST_F(JobManagerTest, ACheckpointOutsideTheJobsDirectoryIsNotCataloged) {
  AddWorker("w1", 1);
  v1::Job job = *jobs_.Submit(Spec(1, kCheckpointed), false);
  for (const std::string& path : std::vector<std::string>{
           "/etc/shadow", "/ckpt/job-9/step-10.ckpt",
        "/ckpt/" + job.id() + "/../job-9/step-10.ckpt",
        "/ckpt/" + job.id() + "/step-10.pt",
        // Another generation's file, or another step's (step 10 of
        // generation 1 is reported): the name fences generations.
        "/ckpt/" + job.id() + "/step-000000010-g2.ckpt",
        "/ckpt/" + job.id() + "/step-000000011-g1.ckpt"}) {
    absl::Status refused =
        jobs_.OnRankCheckpoint("w1", CheckpointAt(job.id(), path));
    EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << path;
  }
  EXPECT_TRUE(jobs_.Checkpoints(job.id())->empty());
  ASSERT_TRUE(jobs_
                  .OnRankCheckpoint("w1", CheckpointAt(job.id(), "/ckpt/" + job.id() +
                                                                 "/step-000000010-g1.ckpt"))
                  .ok());
  EXPECT_EQ(jobs_.Checkpoints(job.id())->size(), 1u);
}

TEST_F(JobManagerTest, ACheckpointReportedAfterTheLastExitIsStillCataloged) {
  AddWorker("w1", 1);
  v1::Job job = *jobs_.Submit(Spec(1, kCheckpointed), false);
  // After a coordinator outage the agent's re-sent exit can come first.
  Exit("w1", job.id(), 0, 0);
  ASSERT_EQ(jobs_.Get(job.id())->state(), v1::JOB_STATE_SUCCEEDED);
  ASSERT_TRUE(jobs_
                  .OnRankCheckpoint("w1", CheckpointAt(job.id(), "/ckpt/" +
                                                                 job.id() +
                                                                 "/step-10.ckpt"))
                  .ok());
  ASSERT_EQ(jobs_.Checkpoints(job.id())->size(), 1u);
  // Another worker cannot add to it.
  AddWorker("w2", 1);
  EXPECT_FALSE(jobs_
                   .OnRankCheckpoint("w2", CheckpointAt(job.id(), "/ckpt/" +
                                                                  job.id() +
                                                                  "/step-20.ckpt"))
                   .ok());
}


// --- retention ---


TEST_F(JobManagerTest, RankOutputReachesWatchersWithItsControlCharactersEscaped) {
  AddWorker("w1", 1);
  v1::Job job = *jobs_.Submit(Spec(1), false);
  v1::RankLog log;
  log.set_job_id(job.id());
  log.set_generation(1);
  log.set_seq(1);
  log.mutable_line()->set_text("\x1b]0;pwned\x07\nI 12:00:00 forged");
  ASSERT_TRUE(jobs_.OnRankLog("w1", log).ok());
  Exit("w1", job.id(), 0, 1, "bad \xff byte \x1b[2J");
  bool closed = false;
  std::string shown;
  const std::vector<v1::JobEvent> events =
      *events_.WaitForEvents(job.id(), 1, 0, &closed);
  for (const v1::JobEvent& e : events) {
    if (e.has_log()) shown = e.log().text();
  }
  EXPECT_EQ(shown, "\\x1b]0;pwned\\x07\\x0aI 12:00:00 forged");
  const std::string reason = jobs_.Get(job.id())->reason();
  EXPECT_THAT(reason, HasSubstr("bad \xef\xbf\xbd byte \\x1b[2J"));
}

TEST(SpecNameTest, ControlCharactersAreRefused) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(
      "name: \"a\\e]0;x\\a\"\nmodel: mlp\n"
      "data: {train_images: /a, train_labels: /b}\n");
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(std::string(spec.status().message()),
              HasSubstr("name: must not contain control characters"));
}

TEST_F(JobManagerTest, AJobsLogIsBoundedOverItsLife) {
  AddWorker("w1", 1);
  v1::Job job = *jobs_.Submit(Spec(1), false);
  const std::string line(16 * 1024, 'x');
  for (int64_t seq = 1; seq <= 4200; ++seq) {  // 66 MiB, within the rate burst
    v1::RankLog log;
    log.set_job_id(job.id());
    log.set_generation(1);
    log.set_seq(seq);
    log.mutable_line()->set_text(line);
    ASSERT_TRUE(jobs_.OnRankLog("w1", log).ok());
  }
  int64_t kept_bytes = 0;
  int said = 0;
  for (const v1::JobEvent& e : Events(job.id())) {
    if (!e.has_log()) continue;
    if (e.log().text().rfind("[trainctl] the job's log passed", 0) == 0) {
      ++said;
    } else {
      kept_bytes += static_cast<int64_t>(e.log().text().size());
    }
  }
  EXPECT_EQ(said, 1);
  EXPECT_LE(kept_bytes, int64_t{64} << 20);
  EXPECT_GT(kept_bytes, int64_t{63} << 20);
}

TEST_F(JobManagerTest, AfterARestartRanksOfFinishedJobsAreNotShownRunning) {
  AddWorker("w1", 1);
  v1::Job job = *jobs_.Submit(Spec(1), false);
  ASSERT_TRUE(jobs_.Cancel(job.id(), "").ok());  // its exit never arrives
  EventHub events;
  Rendezvous rendezvous;
  JobManager restarted(clock_, events, rendezvous, store_, 5'000, 1'000);
  ASSERT_TRUE(restarted.Recover().ok());
  EXPECT_EQ(restarted.Get(job.id())->ranks(0).state(), v1::RANK_STATE_LOST);
}

}  // namespace
}  // namespace trainctl::coordinator
