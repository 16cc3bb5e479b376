#include "coordinator/store_writer.h"

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/write_gate.h"

namespace trainctl::coordinator {
namespace {

JobWrite JobWithEvent(const std::string& id, int64_t seq) {
  JobWrite write;
  v1::Job job;
  job.set_id(id);
  write.jobs.push_back(job);
  v1::JobEvent event;
  event.set_job_id(id);
  event.set_seq(seq);
  event.mutable_log()->set_text(id + "#" + std::to_string(seq));
  write.events.push_back(event);
  return write;
}

std::vector<std::string> StoredIds(InMemoryJobStore& store) {
  std::vector<std::string> ids;
  const StoredState state = *store.LoadAll();
  for (const StoredJob& job : state.jobs) ids.push_back(job.job.id());
  return ids;
}

// Fails every write while `fail` is set, records the order of the rest,
// and can hold a write inside the store (gate).
class ScriptedStore : public InMemoryJobStore {
 public:
  absl::Status Write(const JobWrite& write, Durability d) override {
    gate.Pass();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (fail) return absl::UnavailableError("disk full");
      for (const v1::Job& job : write.jobs) order.push_back(job.id());
      ++writes;
      if (d == Durability::kImmediate) ++commits;
    }
    return InMemoryJobStore::Write(write, d);
  }
  std::vector<std::string> Order() {
    std::lock_guard<std::mutex> lock(mu_);
    return order;
  }

  WriteGate gate;
  bool fail = false;
  int writes = 0, commits = 0;
  std::vector<std::string> order;

 private:
  std::mutex mu_;
};

TEST(StoreWriterTest, DrainWritesInQueueOrderAndPublishesWhatIsDurable) {
  InMemoryJobStore store;
  EventHub hub;
  FakeClock clock;
  StoreWriter writer(store, hub, clock);
  hub.Append("job-1", v1::JobEvent());
  StoreWriter::Ticket ticket = writer.Enqueue(JobWithEvent("job-1", 1),
                                              Durability::kGrouped);
  ticket.Add(writer.Enqueue(JobWithEvent("job-2", 1), Durability::kGrouped));
  EXPECT_TRUE(StoredIds(store).empty());  // queued, not written
  EXPECT_EQ(hub.PublishedSeq("job-1"), 0);
  EXPECT_TRUE(writer.Drain(ticket).ok());
  EXPECT_EQ(StoredIds(store), (std::vector<std::string>{"job-1", "job-2"}));
  EXPECT_EQ(hub.PublishedSeq("job-1"), 1);
}

TEST(StoreWriterTest, AGroupIsOneWriteAndOneCommit) {
  ScriptedStore store;
  EventHub hub;
  FakeClock clock;
  StoreWriter writer(store, hub, clock);
  StoreWriter::Ticket t;
  t.Add(writer.Enqueue(JobWithEvent("job-1", 1), Durability::kImmediate));
  t.Add(writer.Enqueue(JobWithEvent("job-2", 1), Durability::kGrouped));
  t.Add(writer.Enqueue(JobWithEvent("job-3", 1), Durability::kImmediate));
  t.Add(writer.Enqueue(JobWithEvent("job-4", 1), Durability::kGrouped));
  EXPECT_TRUE(writer.Drain(t).ok());
  EXPECT_EQ(store.Order(),
            (std::vector<std::string>{"job-1", "job-2", "job-3", "job-4"}));
  EXPECT_EQ(store.writes, 1);
  EXPECT_EQ(store.commits, 1);
}

TEST(StoreWriterTest, AGroupKeepsEachJobsNewestSnapshotAndEveryEvent) {
  InMemoryJobStore store;
  EventHub hub;
  FakeClock clock;
  StoreWriter writer(store, hub, clock);
  JobWrite first = JobWithEvent("job-1", 1);
  first.jobs[0].set_reason("old");
  JobWrite second = JobWithEvent("job-1", 2);
  second.jobs[0].set_reason("new");
  StoreWriter::Ticket t = writer.Enqueue(first, Durability::kGrouped);
  t.Add(writer.Enqueue(second, Durability::kGrouped));
  ASSERT_TRUE(writer.Drain(t).ok());
  const StoredState state = *store.LoadAll();
  ASSERT_EQ(state.jobs.size(), 1u);
  EXPECT_EQ(state.jobs[0].job.reason(), "new");
  EXPECT_EQ(state.jobs[0].events.size(), 2u);
}

TEST(StoreWriterTest, AFailedWriteIsRetriedAheadOfLaterOnes) {
  ScriptedStore store;
  EventHub hub;
  FakeClock clock;
  StoreWriter writer(store, hub, clock);
  hub.Append("job-1", v1::JobEvent());
  store.fail = true;
  absl::Status first = writer.Drain(
      writer.Enqueue(JobWithEvent("job-1", 1), Durability::kImmediate));
  EXPECT_EQ(first.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(hub.PublishedSeq("job-1"), 0);
  store.fail = false;
  // A grouped write right after a failure waits for the retry...
  EXPECT_TRUE(writer.Drain(writer.Enqueue(JobWithEvent("job-2", 1),
                                          Durability::kGrouped))
                  .ok());
  EXPECT_TRUE(store.Order().empty());
  // ...which writes the failed one first.
  clock.AdvanceMs(1'000);
  EXPECT_TRUE(writer.Drain(writer.Enqueue(JobWithEvent("job-3", 1),
                                          Durability::kGrouped))
                  .ok());
  EXPECT_EQ(store.Order(),
            (std::vector<std::string>{"job-1", "job-2", "job-3"}));
  EXPECT_EQ(hub.PublishedSeq("job-1"), 1);
}

TEST(StoreWriterTest, ARefusedNewJobIsNotRetried) {
  ScriptedStore store;
  EventHub hub;
  FakeClock clock;
  StoreWriter writer(store, hub, clock);
  store.fail = true;
  EXPECT_EQ(writer.Drain(writer.EnqueueNewJob(JobWithEvent("job-1", 1))).code(),
            absl::StatusCode::kUnavailable);
  store.fail = false;
  EXPECT_TRUE(writer.Flush().ok());
  EXPECT_TRUE(StoredIds(store).empty());
  // Its caller publishes it once accepted: the writer never does.
  EXPECT_TRUE(writer.Drain(writer.EnqueueNewJob(JobWithEvent("job-2", 1))).ok());
  EXPECT_EQ(StoredIds(store), (std::vector<std::string>{"job-2"}));
  EXPECT_EQ(hub.PublishedSeq("job-2"), 0);
}

TEST(StoreWriterTest, ADeletionComesAfterTheWritesQueuedBeforeIt) {
  InMemoryJobStore store;
  EventHub hub;
  FakeClock clock;
  StoreWriter writer(store, hub, clock);
  StoreWriter::Ticket t = writer.Enqueue(JobWithEvent("job-1", 1),
                                         Durability::kGrouped);
  t.Add(writer.EnqueueDelete("job-1"));
  t.Add(writer.EnqueueDelete("job-9"));  // never stored: nothing to do
  EXPECT_TRUE(writer.Drain(t).ok());
  EXPECT_TRUE(StoredIds(store).empty());
}

// While one caller's group is in the store, a grouped write returns at
// once and a durable one waits; the first caller writes both after its
// own, in order.
TEST(StoreWriterTest, TheCallerWritingTakesAlongWhatIsQueuedMeanwhile) {
  ScriptedStore store;
  EventHub hub;
  FakeClock clock;
  StoreWriter writer(store, hub, clock);
  store.gate.HoldNext();
  std::thread leader([&] {
    EXPECT_TRUE(writer.Drain(writer.Enqueue(JobWithEvent("job-1", 1),
                                            Durability::kGrouped))
                    .ok());
  });
  store.gate.WaitUntilHolding();
  EXPECT_TRUE(writer.Drain(writer.Enqueue(JobWithEvent("job-2", 1),
                                          Durability::kGrouped))
                  .ok());
  EXPECT_TRUE(store.Order().empty());  // job-1 is still inside the store
  StoreWriter::Ticket durable =
      writer.Enqueue(JobWithEvent("job-3", 1), Durability::kImmediate);
  absl::Status durable_status = absl::UnknownError("not drained");
  std::thread waiter([&] { durable_status = writer.Drain(durable); });
  store.gate.Release();
  waiter.join();
  EXPECT_TRUE(durable_status.ok());
  EXPECT_EQ(store.Order(),
            (std::vector<std::string>{"job-1", "job-2", "job-3"}));
  leader.join();
}

TEST(StoreWriterTest, CatalogChangesAreWrittenInOrderWithTheRest) {
  InMemoryJobStore store;
  EventHub hub;
  FakeClock clock;
  StoreWriter writer(store, hub, clock);
  auto record = [](const std::string& job, int64_t step) {
    CheckpointRecord r;
    r.job_id = job;
    r.step = step;
    r.path = "/ckpt/" + job + "/step-" + std::to_string(step);
    r.info.set_step(step);
    return r;
  };
  StoreWriter::Ticket ticket =
      writer.Enqueue(JobWithEvent("job-1", 1), Durability::kGrouped);
  ticket.Add(writer.EnqueuePutCheckpoint(record("job-1", 10)));
  ticket.Add(writer.EnqueuePutCheckpoint(record("job-1", 20)));
  ticket.Add(writer.EnqueueDeleteCheckpoint("job-1", 10));
  ticket.Add(writer.EnqueueDeleteCheckpoint("job-1", 30));  // never there: fine
  EXPECT_TRUE(store.ListCheckpoints("job-1")->empty());  // queued only
  ASSERT_TRUE(writer.Drain(ticket).ok());
  std::vector<int64_t> steps;
  const std::vector<CheckpointRecord> catalog = *store.ListCheckpoints("job-1");
  for (const CheckpointRecord& c : catalog) steps.push_back(c.step);
  EXPECT_EQ(steps, std::vector<int64_t>{20});
  // A deletion of the job after them leaves no catalog behind.
  ASSERT_TRUE(writer.Drain(writer.EnqueueDelete("job-1")).ok());
  EXPECT_TRUE(store.ListCheckpoints("job-1")->empty());
}

}  // namespace
}  // namespace trainctl::coordinator
