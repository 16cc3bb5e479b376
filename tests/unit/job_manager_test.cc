#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "coordinator/job_state.h"
#include "tests/unit/job_manager_fixture.h"
#include "google/protobuf/util/message_differencer.h"

namespace trainctl::coordinator {
namespace {

using ::testing::HasSubstr;

TEST_F(JobManagerTest, RejectsInvalidSpecNamingTheField) {
  absl::StatusOr<v1::Job> job = jobs_.Submit("model: resnet\n", false);
  ASSERT_FALSE(job.ok());
  EXPECT_THAT(std::string(job.status().message()), HasSubstr("model.type"));
  EXPECT_TRUE(jobs_.List({}).empty());
}

TEST_F(JobManagerTest, DryRunValidatesWithoutQueueing) {
  absl::StatusOr<v1::Job> job = jobs_.Submit(Spec(2), true);
  ASSERT_TRUE(job.ok());
  EXPECT_TRUE(job->id().empty());
  EXPECT_EQ(job->spec().ranks(), 2);
  EXPECT_TRUE(jobs_.List({}).empty());
}

TEST_F(JobManagerTest, QueuedJobSaysWhatItWaitsFor) {
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  v1::Job job = *jobs_.Submit(Spec(4), false);
  EXPECT_EQ(job.state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(job.pending_reason(),
            "needs 4 slots and the cluster has 2 in all; it waits for more "
            "workers and holds up no other job");
}

TEST_F(JobManagerTest, RunsWhenWorkersArriveAndSucceedsWhenAllRanksExitZero) {
  v1::Job job = *jobs_.Submit(Spec(2), false);
  EXPECT_EQ(job.pending_reason(), "needs 2 slots; no workers registered");
  auto w1 = AddWorker("w1", 1);
  EXPECT_EQ(jobs_.Get(job.id())->state(), v1::JOB_STATE_QUEUED);
  auto w2 = AddWorker("w2", 1);

  v1::Job running = *jobs_.Get(job.id());
  EXPECT_EQ(running.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(running.generation(), 1);
  EXPECT_THAT(running.reason(), HasSubstr("ranks 0 on w1, 1 on w2"));
  ASSERT_EQ(w1->Assignments().size(), 1u);
  EXPECT_EQ(w1->Assignments()[0].rank(), 0);
  EXPECT_EQ(w1->Assignments()[0].world_size(), 2);
  EXPECT_EQ(w2->Assignments()[0].rank(), 1);
  EXPECT_EQ(w2->Assignments()[0].spec().name(), "t");
  EXPECT_EQ(jobs_.Workers()[0].slots_free(), 0);

  Exit("w1", job.id(), 0, 0);
  EXPECT_EQ(jobs_.Get(job.id())->state(), v1::JOB_STATE_RUNNING);
  Exit("w2", job.id(), 1, 0);
  v1::Job done = *jobs_.Get(job.id());
  EXPECT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(done.reason(), "all 2 ranks finished");
  EXPECT_EQ(jobs_.Workers()[0].slots_free(), 1);

  // Every transition is an event, with a timestamp and a reason, in order.
  // (The scheduler's notes on what it waited for are log events between.)
  std::vector<v1::JobEvent> all = Events(job.id());
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(all[i].seq(), static_cast<int64_t>(i) + 1);
  }
  std::vector<v1::JobEvent> events;
  for (const v1::JobEvent& e : all) {
    if (e.has_transition()) events.push_back(e);
  }
  ASSERT_EQ(events.size(), 3u);
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_GT(events[i].transition().time_unix_ms(), 0);
    EXPECT_FALSE(events[i].transition().reason().empty());
  }
  EXPECT_EQ(events[2].transition().to(), v1::JOB_STATE_SUCCEEDED);
  ASSERT_EQ(done.transitions_size(), 3);
}

TEST_F(JobManagerTest, NonZeroExitFailsJobAndStopsOtherRanks) {
  auto w1 = AddWorker("w1", 1);
  auto w2 = AddWorker("w2", 1);
  v1::Job job = *jobs_.Submit(Spec(2), false);
  Exit("w2", job.id(), 1, 1, "data.train_images: a: cannot open");
  v1::Job failed = *jobs_.Get(job.id());
  EXPECT_EQ(failed.state(), v1::JOB_STATE_FAILED);
  EXPECT_EQ(failed.reason(),
            "rank 1 on worker w2 exited with code 1: data.train_images: a: "
            "cannot open");
  EXPECT_EQ(w1->Cancels(), 1);
  // The slot of rank 0 is free only once its process is gone.
  EXPECT_EQ(jobs_.Workers()[0].slots_free(), 0);
  Exit("w1", job.id(), 0, -15);
  EXPECT_EQ(jobs_.Workers()[0].slots_free(), 1);
  EXPECT_EQ(jobs_.Get(job.id())->state(), v1::JOB_STATE_FAILED);
}

TEST_F(JobManagerTest, CancelQueuedAndRunningJobs) {
  auto w1 = AddWorker("w1", 1);
  v1::Job running = *jobs_.Submit(Spec(1), false);
  v1::Job queued = *jobs_.Submit(Spec(1), false);
  EXPECT_EQ(jobs_.Get(queued.id())->pending_reason(),
            "needs 1 slots; 0 of 1 registered slots free");

  v1::Job c1 = *jobs_.Cancel(queued.id(), "");
  EXPECT_EQ(c1.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(c1.reason(), "cancelled by user");
  v1::Job c2 = *jobs_.Cancel(running.id(), "changed my mind");
  EXPECT_EQ(c2.state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(w1->Cancels(), 1);
  EXPECT_EQ(jobs_.Cancel(running.id(), "").status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(jobs_.Cancel("job-99", "").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(JobManagerTest, FifoQueueStartsNextJobWhenSlotFrees) {
  AddWorker("w1", 1);
  v1::Job a = *jobs_.Submit(Spec(1), false);
  v1::Job b = *jobs_.Submit(Spec(1), false);
  EXPECT_EQ(jobs_.Get(b.id())->state(), v1::JOB_STATE_QUEUED);
  Exit("w1", a.id(), 0, 0);
  EXPECT_EQ(jobs_.Get(b.id())->state(), v1::JOB_STATE_RUNNING);
}

TEST_F(JobManagerTest, ExpiredLeaseFailsJobAndDisconnectsWorker) {
  auto w1 = AddWorker("w1", 1);
  auto w2 = AddWorker("w2", 1);
  v1::Job job = *jobs_.Submit(Spec(2), false);
  clock_.AdvanceMs(3'000);
  jobs_.Heartbeat("w1");
  clock_.AdvanceMs(3'000);  // w2 silent for 6 s > 5 s lease
  jobs_.CheckLeases();
  v1::Job failed = *jobs_.Get(job.id());
  EXPECT_EQ(failed.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(failed.reason(), HasSubstr("worker w2 running rank 1 was lost"));
  EXPECT_TRUE(w2->disconnected);
  EXPECT_FALSE(w1->disconnected);
  EXPECT_EQ(jobs_.Workers().size(), 1u);
}

TEST_F(JobManagerTest, DuplicateWorkerNameRejected) {
  AddWorker("w1", 1);
  v1::RegisterRequest reg;
  reg.set_name("w1");
  reg.set_slots(1);
  absl::Status s =
      jobs_.RegisterWorker(reg, std::make_shared<FakeAgentLink>());
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
}

TEST_F(JobManagerTest, StaleStreamCloseDoesNotRemoveNewConnection) {
  auto old_link = AddWorker("w1", 1);
  jobs_.WorkerDisconnected("w1", old_link.get());
  auto new_link = AddWorker("w1", 1);
  jobs_.WorkerDisconnected("w1", old_link.get());
  EXPECT_EQ(jobs_.Workers().size(), 1u);
}

TEST_F(JobManagerTest, MetricsFromAWorkerNotRunningTheRankAreRejected) {
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  v1::Job job = *jobs_.Submit(Spec(2), false);
  v1::RankMetrics m;
  m.set_job_id(job.id());
  m.set_generation(1);
  m.mutable_point()->set_rank(0);
  m.mutable_point()->set_kind("train");
  m.mutable_point()->set_step(5);
  (*m.mutable_point()->mutable_values())["loss"] = 0.5;
  EXPECT_EQ(jobs_.OnRankMetrics("w2", m).code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(jobs_.OnRankMetrics("w1", m).ok());
  v1::Job now = *jobs_.Get(job.id());
  EXPECT_EQ(now.latest_train().step(), 5);
  EXPECT_DOUBLE_EQ(now.latest_train().values().at("loss"), 0.5);
  m.mutable_point()->set_kind("plan");
  (*m.mutable_point()->mutable_values())["total_steps"] = 120;
  EXPECT_TRUE(jobs_.OnRankMetrics("w1", m).ok());
  EXPECT_EQ(jobs_.Get(job.id())->total_steps(), 120);
}

// --- durable state: write-through and recovery ---

// A store whose writes can be made to fail, as a full disk would.
class FlakyJobStore : public InMemoryJobStore {
 public:
  absl::Status Write(const JobWrite& write, Durability d) override {
    if (fail) return absl::UnavailableError("disk on fire");
    return InMemoryJobStore::Write(write, d);
  }
  bool fail = false;
};

// Field by field: serialized bytes may differ in map order.
bool Same(const google::protobuf::Message& a,
          const google::protobuf::Message& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

template <typename List>
bool SameList(const List& a, const List& b) {
  if (a.size() != b.size()) return false;
  for (int i = 0; i < static_cast<int>(a.size()); ++i) {
    if (!Same(a[i], b[i])) return false;
  }
  return true;
}

TEST_F(JobManagerTest, EveryChangeIsWrittenThroughInEventOrder) {
  AddWorker("w1", 1);
  v1::Job job = *jobs_.Submit(Spec(1), false);
  v1::RankMetrics m;
  m.set_job_id(job.id());
  m.set_generation(1);
  m.mutable_point()->set_kind("train");
  m.mutable_point()->set_step(7);
  ASSERT_TRUE(jobs_.OnRankMetrics("w1", m).ok());
  v1::RankLog log;
  log.set_job_id(job.id());
  log.set_generation(1);
  log.mutable_line()->set_text("hello");
  ASSERT_TRUE(jobs_.OnRankLog("w1", log).ok());
  Exit("w1", job.id(), 0, 0);

  StoredState state = *store_.LoadAll();
  ASSERT_EQ(state.jobs.size(), 1u);
  EXPECT_TRUE(Same(state.jobs[0].job, *jobs_.Get(job.id())));
  EXPECT_EQ(state.jobs[0].job.latest_train().step(), 7);
  // queued, running, metric, log, succeeded: the hub's events, in order
  ASSERT_EQ(state.jobs[0].events.size(), 5u);
  EXPECT_TRUE(SameList(state.jobs[0].events, Events(job.id())));
  EXPECT_EQ(state.next_job_number, 2);
}

// After a restart the hub holds only the newest events of each unfinished
// job (none of a finished one), yet a watcher from seq 1 sees the whole
// history, and what the reports changed is rebuilt from all of it.
TEST_F(JobManagerTest, RecoveryHoldsOnlyEventTailsYetWatchersSeeEverything) {
  AddWorker("w1", 1);
  v1::Job job = *jobs_.Submit(Spec(1), false);
  for (int step = 1; step <= 300; ++step) {
    clock_.AdvanceMs(1'000);
    v1::RankMetrics m;
    m.set_job_id(job.id());
    m.set_generation(1);
    m.mutable_point()->set_kind("train");
    m.mutable_point()->set_step(step);
    (*m.mutable_point()->mutable_values())["loss"] = 1.0 / step;
    ASSERT_TRUE(jobs_.OnRankMetrics("w1", m).ok());
    v1::RankLog log;
    log.set_job_id(job.id());
    log.set_generation(1);
    log.mutable_line()->set_text("step " + std::to_string(step));
    ASSERT_TRUE(jobs_.OnRankLog("w1", log).ok());
  }
  const std::vector<v1::JobEvent> history = Events(job.id());
  ASSERT_GT(history.size(), 600u);
  const v1::Job before = *jobs_.Get(job.id());

  constexpr size_t kTail = 4'096;
  EventHub events(
      [this](const std::string& id, int64_t from, size_t max) {
        return store_.ReadEvents(id, from, max);
      },
      kTail);
  Rendezvous rendezvous;
  JobManager restarted(clock_, events, rendezvous, store_, 5'000, 1'000);
  ASSERT_TRUE(restarted.Recover().ok());
  EXPECT_LE(events.HeldBytes(), kTail + 1'000);  // + what Recover appended
  EXPECT_GT(events.HeldBytes(), 0u);
  const v1::Job after = *restarted.Get(job.id());
  EXPECT_EQ(after.latest_train().step(), 300);
  EXPECT_TRUE(Same(after.latest_train(), before.latest_train()));

  std::vector<v1::JobEvent> seen;
  bool closed = false;
  while (seen.size() < history.size()) {
    absl::StatusOr<std::vector<v1::JobEvent>> batch = events.WaitForEvents(
        job.id(), static_cast<int64_t>(seen.size()) + 1, 0, &closed, 50);
    ASSERT_TRUE(batch.ok()) << batch.status();
    ASSERT_FALSE(batch->empty());
    seen.insert(seen.end(), batch->begin(), batch->end());
  }
  seen.resize(history.size());
  EXPECT_TRUE(SameList(seen, history));
}

TEST_F(JobManagerTest, SubmitFailsAndQueuesNothingWhenTheStoreFails) {
  FlakyJobStore flaky;
  JobManager jobs(clock_, events_, rendezvous_, flaky, 5'000, 1'000);
  flaky.fail = true;
  absl::StatusOr<v1::Job> job = jobs.Submit(Spec(1), false);
  EXPECT_EQ(job.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(job.status().message()), HasSubstr("disk on fire"));
  EXPECT_TRUE(jobs.List({}).empty());
  flaky.fail = false;
  EXPECT_EQ(jobs.Submit(Spec(1), false)->id(), "job-1");
}

TEST_F(JobManagerTest, RecoveryRequeuesAwaitsRunningKeepsFinalContinuesIds) {
  auto w1 = AddWorker("w1", 1);
  v1::Job done = *jobs_.Submit(Spec(1), false);
  Exit("w1", done.id(), 0, 0);
  v1::Job running = *jobs_.Submit(Spec(1), false);
  v1::Job wide = *jobs_.Submit(Spec(2), false);
  v1::Job narrow = *jobs_.Submit(Spec(1), false);
  ASSERT_EQ(jobs_.Get(running.id())->state(), v1::JOB_STATE_RUNNING);
  const std::vector<v1::JobEvent> done_events = Events(done.id());
  const std::vector<v1::JobEvent> running_events = Events(running.id());
  const v1::Job done_before = *jobs_.Get(done.id());

  // A new coordinator process: fresh hub and manager on the same store.
  EventHub events;
  Rendezvous rendezvous;
  JobManager restarted(clock_, events, rendezvous, store_, 5'000, 1'000);
  clock_.AdvanceMs(1'000);
  ASSERT_TRUE(restarted.Recover().ok());

  std::vector<v1::Job> all = restarted.List({});
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[0].id(), done.id());
  EXPECT_EQ(all[3].id(), narrow.id());
  EXPECT_TRUE(Same(all[0], done_before));
  bool closed = false;
  EXPECT_TRUE(
      SameList(*events.WaitForEvents(done.id(), 1, 0, &closed), done_events));
  EXPECT_TRUE(closed);

  // The running job waits for its agent to re-adopt its rank; nothing about
  // it changed yet.
  v1::Job waiting = *restarted.Get(running.id());
  EXPECT_EQ(waiting.state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(waiting.ranks(0).state(), v1::RANK_STATE_ASSIGNED);
  EXPECT_TRUE(SameList(*events.WaitForEvents(running.id(), 1, 0, &closed),
                       running_events));

  EXPECT_EQ(restarted.Get(wide.id())->state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(restarted.Get(wide.id())->pending_reason(),
            "needs 2 slots; no workers registered");
  // FIFO order survived: the older, wider job starts first.
  auto link = std::make_shared<FakeAgentLink>();
  v1::RegisterRequest reg;
  reg.set_name("w9");
  reg.set_slots(2);
  ASSERT_TRUE(restarted.RegisterWorker(reg, link).ok());
  EXPECT_EQ(restarted.Get(wide.id())->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(restarted.Get(narrow.id())->state(), v1::JOB_STATE_QUEUED);

  // w1 never comes back: after the grace period the generation restarts,
  // ahead of the queued job, without using up a restart.
  clock_.AdvanceMs(16'000);
  restarted.Heartbeat("w9");
  restarted.CheckLeases();
  v1::Job restarting = *restarted.Get(running.id());
  EXPECT_EQ(restarting.state(), v1::JOB_STATE_RESTARTING);
  EXPECT_THAT(restarting.reason(),
              HasSubstr("not every rank of generation 1 came back"));
  EXPECT_EQ(restarting.restarts(), 0);
  EXPECT_EQ(restarting.pending_reason(),
            "needs 1 slots; 0 of 2 registered slots free");
  EXPECT_EQ(restarted.Get(narrow.id())->pending_reason(),
            "needs 1 slots; 0 of 2 registered slots free; after job " +
                running.id() + ", ahead in the queue");
  EXPECT_EQ(store_.LoadAll()->jobs[1].job.state(),
            v1::JOB_STATE_RESTARTING);

  EXPECT_EQ(restarted.Submit(Spec(1), false)->id(), "job-5");
}

TEST_F(JobManagerTest, StreamsClosingAtShutdownDoNotFailJobs) {
  auto w1 = AddWorker("w1", 1);
  v1::Job job = *jobs_.Submit(Spec(1), false);
  jobs_.PrepareForShutdown();
  jobs_.WorkerDisconnected("w1", w1.get());
  EXPECT_EQ(jobs_.Get(job.id())->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(store_.LoadAll()->jobs[0].job.state(), v1::JOB_STATE_RUNNING);
}

TEST_F(JobManagerTest, RecoverRefusesToRunTwice) {
  ASSERT_TRUE(jobs_.Submit(Spec(1), false).ok());
  EXPECT_EQ(jobs_.Recover().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(JobStateTest, TransitionsFollowTheMachine) {
  EXPECT_TRUE(CheckTransition(v1::JOB_STATE_QUEUED, v1::JOB_STATE_RUNNING).ok());
  EXPECT_TRUE(
      CheckTransition(v1::JOB_STATE_QUEUED, v1::JOB_STATE_CANCELLED).ok());
  EXPECT_TRUE(
      CheckTransition(v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED).ok());
  EXPECT_TRUE(CheckTransition(v1::JOB_STATE_RUNNING, v1::JOB_STATE_FAILED).ok());
  EXPECT_FALSE(
      CheckTransition(v1::JOB_STATE_QUEUED, v1::JOB_STATE_SUCCEEDED).ok());
  EXPECT_FALSE(
      CheckTransition(v1::JOB_STATE_SUCCEEDED, v1::JOB_STATE_RUNNING).ok());
  absl::Status s =
      CheckTransition(v1::JOB_STATE_CANCELLED, v1::JOB_STATE_FAILED);
  EXPECT_EQ(s.message(), "job cannot go from CANCELLED to FAILED");
}

}  // namespace
}  // namespace trainctl::coordinator
