// What JobManager does not do under its mutex: wait for a commit, or read
// the checkpoint catalog from the store (the core holds it).

#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "common/spec.h"
#include "tests/unit/job_manager_fixture.h"
#include "tests/unit/write_gate.h"

namespace trainctl::coordinator {
namespace {

// A JobManager over `Store` with one worker of one slot.
template <typename Store>
struct OneWorkerCluster {
  OneWorkerCluster() {
    v1::RegisterRequest reg;
    reg.set_name("w1");
    reg.set_slots(1);
    reg.set_collective_host("127.0.0.1");
    EXPECT_TRUE(jobs.RegisterWorker(reg, link).ok());
  }
  FakeClock clock;
  EventHub hub;
  Rendezvous rendezvous;
  Store store;
  JobManager jobs{clock, hub, rendezvous, store, 5'000, 1'000};
  std::shared_ptr<FakeAgentLink> link = std::make_shared<FakeAgentLink>();
};

// Holds a durable write inside the store while the gate says so, as a
// slow SQLite commit (a WAL checkpoint's fsync) does.
class SlowCommitStore : public InMemoryJobStore {
 public:
  absl::Status Write(const JobWrite& write, Durability d) override {
    if (d == Durability::kImmediate) gate.Pass();
    return InMemoryJobStore::Write(write, d);
  }
  WriteGate gate;
};

TEST(JobManagerLockTest, OtherCallsGoOnWhileATransitionCommits) {
  OneWorkerCluster<SlowCommitStore> c;
  const v1::Job job = *c.jobs.Submit(Spec(1), false);

  c.store.gate.HoldNext();
  absl::StatusOr<v1::Job> cancelled;
  std::thread cancel([&] { cancelled = c.jobs.Cancel(job.id(), ""); });
  c.store.gate.WaitUntilHolding();
  // The cancel's commit is stuck in the store: the manager still answers,
  // and its agent has not yet been told to stop the rank.
  EXPECT_EQ(c.jobs.Get(job.id())->state(), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(c.jobs.List({}).size(), 1u);
  EXPECT_EQ(c.link->Cancels(), 0);
  v1::RankMetrics m;
  m.set_job_id(job.id());
  m.set_generation(1);
  m.mutable_point()->set_kind("train");
  EXPECT_TRUE(c.jobs.OnRankMetrics("w1", m).ok());
  c.store.gate.Release();
  cancel.join();
  ASSERT_TRUE(cancelled.ok());
  EXPECT_EQ(c.link->Cancels(), 1);  // sent once the transition was durable
}

// Counts the catalog reads (each would take the store's mutex).
class CatalogCountingStore : public InMemoryJobStore {
 public:
  absl::StatusOr<std::vector<CheckpointRecord>> ListCheckpoints(
      const std::string& job_id) override {
    ++lists;
    return InMemoryJobStore::ListCheckpoints(job_id);
  }
  int lists = 0;
};

TEST(JobManagerLockTest, TheCatalogIsReadFromTheStoreOnlyAtRecover) {
  OneWorkerCluster<CatalogCountingStore> c;
  const std::string spec = Spec(1, "checkpoint: {dir: /ckpt}\n");
  // A finished job of an earlier coordinator, with one checkpoint.
  v1::Job old;
  old.set_id("job-1");
  old.set_state(v1::JOB_STATE_SUCCEEDED);
  *old.mutable_spec() = *ParseJobSpec(spec);
  JobWrite write;
  write.jobs.push_back(old);
  write.next_job_number = 2;
  ASSERT_TRUE(c.store.Write(write, Durability::kImmediate).ok());
  CheckpointRecord record;
  record.job_id = "job-1";
  record.step = 40;
  record.path = "/ckpt/job-1/step-000000040-g1.ckpt";
  record.info.set_job_id("job-1");
  record.info.set_step(40);
  record.info.set_path(record.path);
  ASSERT_TRUE(c.store.PutCheckpoint(record).ok());
  ASSERT_TRUE(c.jobs.Recover().ok());
  EXPECT_EQ(c.store.lists, 1);

  // A resume, a start and a checkpoint report all use the catalog in
  // memory; the report's entry still reaches the store.
  const v1::Job job = *c.jobs.Submit(spec, false, "job-1");
  EXPECT_EQ(c.jobs.Get(job.id())->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(job.resume_from().step(), 40);
  v1::RankCheckpoint report;
  report.set_job_id(job.id());
  report.set_generation(1);
  report.set_seq(1);
  report.mutable_checkpoint()->set_step(80);
  report.mutable_checkpoint()->set_path("/ckpt/" + job.id() +
                                        "/step-000000080-g1.ckpt");
  ASSERT_TRUE(c.jobs.OnRankCheckpoint("w1", report).ok());
  ASSERT_TRUE(c.jobs.Flush().ok());
  EXPECT_EQ(c.jobs.Checkpoints(job.id())->size(), 1u);
  EXPECT_EQ(c.store.lists, 1);
  EXPECT_EQ(c.store.InMemoryJobStore::ListCheckpoints(job.id())->size(), 1u);
}

}  // namespace
}  // namespace trainctl::coordinator
