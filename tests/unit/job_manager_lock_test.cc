// What JobManager no longer does under its mutex: wait for a commit, or
// read the store for a job it knows has nothing there.

#include <gtest/gtest.h>

#include <memory>
#include <thread>

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

// Counts the catalog reads (each takes the store's mutex under the
// JobManager's lock).
class CatalogCountingStore : public InMemoryJobStore {
 public:
  absl::StatusOr<std::vector<CheckpointRecord>> ListCheckpoints(
      const std::string& job_id) override {
    ++lists;
    return InMemoryJobStore::ListCheckpoints(job_id);
  }
  int lists = 0;
};

TEST(JobManagerLockTest, AJobSubmittedHereStartsWithoutReadingTheCatalog) {
  OneWorkerCluster<CatalogCountingStore> c;
  const v1::Job job = *c.jobs.Submit(Spec(1), false);
  EXPECT_EQ(c.jobs.Get(job.id())->state(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(c.store.lists, 0);
}

}  // namespace
}  // namespace trainctl::coordinator
