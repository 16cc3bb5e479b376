// EventHub: what watchers see (published events only, in seq order, in
// bounded batches) and when a wait ends (publish, close, forget).

#include "coordinator/event_hub.h"

#include <future>
#include <map>

#include <gtest/gtest.h>

namespace trainctl::coordinator {
namespace {

v1::JobEvent Log(const std::string& text) {
  v1::JobEvent event;
  event.mutable_log()->set_text(text);
  return event;
}

std::vector<int64_t> Seqs(const std::vector<v1::JobEvent>& events) {
  std::vector<int64_t> seqs;
  for (const v1::JobEvent& e : events) seqs.push_back(e.seq());
  return seqs;
}

v1::JobEvent Change(v1::JobState from, v1::JobState to) {
  v1::JobEvent event;
  event.mutable_transition()->set_from(from);
  event.mutable_transition()->set_to(to);
  return event;
}

// The cluster-wide feed of state changes (list -w): published transitions
// only, in publish order across jobs; a watcher too far behind is told.
TEST(EventHubTest, StateChangesOfEveryJobInPublishOrder) {
  EventHub hub;
  EXPECT_EQ(hub.StateChangeSeq(), 0);
  hub.Append("j1", Change(v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_QUEUED));
  hub.Append("j1", Log("not a change"));
  hub.Append("j2", Change(v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_QUEUED));
  hub.Append("j1", Change(v1::JOB_STATE_QUEUED, v1::JOB_STATE_RUNNING));
  bool missed = true;
  EXPECT_TRUE(hub.WaitForStateChanges(0, 0, &missed).empty());  // unpublished
  EXPECT_FALSE(missed);
  hub.Publish("j2", 1);
  hub.Publish("j1", 3);
  std::vector<EventHub::StateChange> changes = hub.WaitForStateChanges(0, 0, &missed);
  ASSERT_EQ(changes.size(), 3u);
  EXPECT_EQ(changes[0].job_id, "j2");
  EXPECT_EQ(changes[1].job_id, "j1");
  EXPECT_EQ(changes[1].transition.to(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(changes[2].transition.to(), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(changes[2].feed_seq, 3);
  EXPECT_EQ(hub.StateChangeSeq(), 3);
  EXPECT_EQ(hub.WaitForStateChanges(2, 0, &missed).size(), 1u);
  EXPECT_TRUE(hub.WaitForStateChanges(3, 0, &missed).empty());
  EXPECT_FALSE(missed);

  // A waiter wakes on the next change.
  std::future<std::vector<EventHub::StateChange>> waiter =
      std::async(std::launch::async, [&hub] {
        bool m = false;
        return hub.WaitForStateChanges(3, 10'000, &m);
      });
  hub.Append("j2", Change(v1::JOB_STATE_QUEUED, v1::JOB_STATE_CANCELLED));
  hub.Publish("j2", 2);
  EXPECT_EQ(waiter.get().at(0).transition.to(), v1::JOB_STATE_CANCELLED);

  // The feed keeps the newest kStateChangesKept.
  for (size_t i = 0; i < EventHub::kStateChangesKept; ++i) {
    hub.Publish("j3", hub.Append("j3", Change(v1::JOB_STATE_RUNNING,
                                              v1::JOB_STATE_RESTARTING)));
  }
  EXPECT_EQ(hub.WaitForStateChanges(4, 0, &missed).size(), EventHub::kStateChangesKept);
  EXPECT_FALSE(missed);
  EXPECT_EQ(hub.WaitForStateChanges(3, 0, &missed).size(), EventHub::kStateChangesKept);
  EXPECT_TRUE(missed);
}

TEST(EventHubTest, ShowsOnlyPublishedEventsInOrder) {
  EventHub hub;
  EXPECT_EQ(hub.Append("j1", Log("a")), 1);
  EXPECT_EQ(hub.Append("j1", Log("b")), 2);
  EXPECT_EQ(hub.Append("j2", Log("c")), 1);  // seq is per job
  bool closed = true;
  EXPECT_TRUE(hub.WaitForEvents("j1", 1, 0, &closed)->empty());
  EXPECT_FALSE(closed);
  hub.Publish("j1", 1);
  std::vector<v1::JobEvent> seen = *hub.WaitForEvents("j1", 1, 0, &closed);
  ASSERT_EQ(Seqs(seen), (std::vector<int64_t>{1}));
  EXPECT_EQ(seen[0].job_id(), "j1");
  EXPECT_EQ(seen[0].log().text(), "a");
  hub.Publish("j1", 9);  // never past what exists
  EXPECT_EQ(Seqs(*hub.WaitForEvents("j1", 1, 0, &closed)),
            (std::vector<int64_t>{1, 2}));
  hub.Publish("j1", 1);  // never lowers what is visible
  EXPECT_EQ(Seqs(*hub.WaitForEvents("j1", 2, 0, &closed)),
            (std::vector<int64_t>{2}));
  EXPECT_TRUE(hub.WaitForEvents("j2", 1, 0, &closed)->empty());
}

TEST(EventHubTest, PublishedSeqIsTheLastVisibleEvent) {
  EventHub hub;
  EXPECT_EQ(hub.PublishedSeq("j"), 0);
  hub.Append("j", Log("a"));
  hub.Append("j", Log("b"));
  EXPECT_EQ(hub.PublishedSeq("j"), 0);  // not durable yet
  hub.Publish("j", 1);
  EXPECT_EQ(hub.PublishedSeq("j"), 1);
  hub.Forget("j");
  EXPECT_EQ(hub.PublishedSeq("j"), 0);
}

TEST(EventHubTest, BatchesAreBoundedAndClosedOnlyAtTheEnd) {
  EventHub hub;
  for (int i = 0; i < 5; ++i) hub.Append("j", Log("x"));
  hub.Publish("j", 5);
  hub.Close("j");
  bool closed = true;
  EXPECT_EQ(Seqs(*hub.WaitForEvents("j", 1, 0, &closed, 2)),
            (std::vector<int64_t>{1, 2}));
  EXPECT_FALSE(closed);  // three more to read
  EXPECT_EQ(Seqs(*hub.WaitForEvents("j", 3, 0, &closed, 2)),
            (std::vector<int64_t>{3, 4}));
  EXPECT_FALSE(closed);
  EXPECT_EQ(Seqs(*hub.WaitForEvents("j", 5, 0, &closed, 2)),
            (std::vector<int64_t>{5}));
  EXPECT_TRUE(closed);
  EXPECT_TRUE(hub.WaitForEvents("j", 6, 0, &closed, 2)->empty());
  EXPECT_TRUE(closed);
}

TEST(EventHubTest, AClosedLogIsCompleteOnlyOnceEverythingIsPublished) {
  EventHub hub;
  hub.Append("j", Log("a"));
  hub.Append("j", Log("b"));
  hub.Close("j");
  bool closed = true;
  EXPECT_TRUE(hub.WaitForEvents("j", 1, 0, &closed)->empty());
  EXPECT_FALSE(closed);  // b is not durable yet
  hub.Publish("j", 2);
  EXPECT_EQ(hub.WaitForEvents("j", 1, 0, &closed)->size(), 2u);
  EXPECT_TRUE(closed);
}

// Each wait below would last 60 s if its wake-up were lost; the test asserts
// what the wait returns, not how long it took.
TEST(EventHubTest, APublishEndsTheWaitOfThatJobsWatcher) {
  EventHub hub;
  hub.Append("j", Log("a"));
  std::future<std::vector<v1::JobEvent>> waiting = std::async(
      std::launch::async, [&hub] {
        bool closed = false;
        return *hub.WaitForEvents("j", 1, 60'000, &closed);
      });
  hub.Append("other", Log("x"));
  hub.Publish("other", 1);
  hub.Publish("j", 1);
  EXPECT_EQ(Seqs(waiting.get()), (std::vector<int64_t>{1}));
}

TEST(EventHubTest, ForgetEndsWaitsAndReadsAsClosedAndEmpty) {
  EventHub hub;
  hub.Append("j", Log("a"));
  hub.Publish("j", 1);
  std::future<bool> waiting = std::async(std::launch::async, [&hub] {
    bool closed = false;
    hub.WaitForEvents("j", 2, 60'000, &closed).IgnoreError();  // waits for seq 2
    return closed;
  });
  // Until the waiter is in, a Forget before it reads the missing log the
  // same way: closed either way.
  hub.Forget("j");
  EXPECT_TRUE(waiting.get());
  bool closed = false;
  EXPECT_TRUE(hub.WaitForEvents("j", 1, 0, &closed)->empty());
  EXPECT_TRUE(closed);
}

TEST(EventHubTest, RestoreKeepsStoredSeqsAndRefusesGaps) {
  EventHub hub;
  std::vector<v1::JobEvent> stored{Log("a"), Log("b")};
  stored[0].set_seq(1);
  stored[1].set_seq(2);
  ASSERT_TRUE(hub.Restore("j", 2, stored, /*closed=*/false).ok());
  EXPECT_EQ(hub.Append("j", Log("c")), 3);
  bool closed = true;
  EXPECT_EQ(hub.WaitForEvents("j", 1, 0, &closed)->size(), 2u);  // restored = published
  stored[1].set_seq(3);
  EXPECT_EQ(hub.Restore("k", 3, stored, false).code(),
            absl::StatusCode::kDataLoss);
}

// A stand-in for the store: every event the test publishes is put here
// first, as JobManager writes before it publishes.
struct FakeStore {
  std::map<std::string, std::map<int64_t, v1::JobEvent>> events;
  int reads = 0;
  EventHub::StoreReader Reader() {
    return [this](const std::string& job, int64_t from, size_t max)
               -> absl::StatusOr<std::vector<v1::JobEvent>> {
      ++reads;
      std::vector<v1::JobEvent> out;
      auto& log = events[job];
      for (auto it = log.lower_bound(from);
           it != log.end() && out.size() < max; ++it) {
        out.push_back(it->second);
      }
      return out;
    };
  }
};

// Appends `n` log lines of `size` bytes to the job, stores and publishes them.
void AppendDurable(EventHub& hub, FakeStore& store, const std::string& job,
                   int n, size_t size) {
  for (int i = 0; i < n; ++i) {
    v1::JobEvent event = Log(std::string(size, 'x'));
    const int64_t seq = hub.Append(job, event);
    event.set_seq(seq);
    event.set_job_id(job);
    store.events[job][seq] = event;
    hub.Publish(job, seq);
  }
}

TEST(EventHubTest, HoldsOnlyABoundedTailAndReadsOlderEventsFromTheStore) {
  FakeStore store;
  EventHub hub(store.Reader(), /*tail_bytes=*/10'000);
  AppendDurable(hub, store, "j", 1000, 100);  // ~100 KB in all
  EXPECT_LE(hub.HeldBytes(), 10'000u);
  EXPECT_GT(hub.HeldBytes(), 5'000u);  // the tail is kept, not dropped
  bool closed = true;
  // The newest ones come from memory...
  EXPECT_EQ(Seqs(*hub.WaitForEvents("j", 999, 0, &closed)),
            (std::vector<int64_t>{999, 1000}));
  EXPECT_EQ(store.reads, 0);
  EXPECT_FALSE(closed);
  // ...a watcher from the start reads every event, in order, from both.
  std::vector<int64_t> seen;
  for (int64_t next = 1; next <= 1000;) {
    absl::StatusOr<std::vector<v1::JobEvent>> batch =
        hub.WaitForEvents("j", next, 0, &closed, 64);
    ASSERT_TRUE(batch.ok()) << batch.status();
    ASSERT_FALSE(batch->empty());
    for (const v1::JobEvent& e : *batch) seen.push_back(e.seq());
    next = batch->back().seq() + 1;
  }
  ASSERT_EQ(seen.size(), 1000u);
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], int64_t(i) + 1);
  EXPECT_GT(store.reads, 0);
}

TEST(EventHubTest, UnpublishedEventsStayHeldWhateverTheBudget) {
  FakeStore store;
  EventHub hub(store.Reader(), /*tail_bytes=*/0);
  for (int i = 0; i < 3; ++i) hub.Append("j", Log("not durable yet"));
  EXPECT_GT(hub.HeldBytes(), 0u);
  bool closed = true;
  EXPECT_TRUE(hub.WaitForEvents("j", 1, 0, &closed)->empty());
  EXPECT_FALSE(closed);
}

TEST(EventHubTest, AFinishedJobHoldsNothingAndIsServedFromTheStore) {
  FakeStore store;
  EventHub hub(store.Reader(), /*tail_bytes=*/1'000'000);
  AppendDurable(hub, store, "j", 5, 10);
  hub.Close("j");
  EXPECT_EQ(hub.HeldBytes(), 0u);
  EXPECT_EQ(hub.PublishedSeq("j"), 5);
  bool closed = false;
  EXPECT_EQ(Seqs(*hub.WaitForEvents("j", 2, 0, &closed)),
            (std::vector<int64_t>{2, 3, 4, 5}));
  EXPECT_TRUE(closed);
  EXPECT_EQ(Seqs(*hub.WaitForEvents("j", 1, 0, &closed, 2)),
            (std::vector<int64_t>{1, 2}));
  EXPECT_FALSE(closed);  // three more to read
}

TEST(EventHubTest, RestoreTakesTheTailOfAStoredHistory) {
  FakeStore store;
  EventHub hub(store.Reader(), /*tail_bytes=*/1'000'000);
  std::vector<v1::JobEvent> tail;
  for (int64_t seq = 1; seq <= 10; ++seq) {
    v1::JobEvent event = Log("line");
    event.set_seq(seq);
    event.set_job_id("j");
    store.events["j"][seq] = event;
    if (seq > 7) tail.push_back(event);
  }
  ASSERT_TRUE(hub.Restore("j", 10, tail, /*closed=*/false).ok());
  EXPECT_EQ(hub.Append("j", Log("next")), 11);
  bool closed = true;
  EXPECT_EQ(Seqs(*hub.WaitForEvents("j", 1, 0, &closed, 4)),
            (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(Seqs(*hub.WaitForEvents("j", 8, 0, &closed)),
            (std::vector<int64_t>{8, 9, 10}));
  // Without a store to read from, a partial history is refused.
  EventHub plain;
  EXPECT_EQ(plain.Restore("j", 10, tail, false).code(),
            absl::StatusCode::kDataLoss);
}

TEST(EventHubTest, AStoreErrorReachesTheWatcher) {
  EventHub hub(
      [](const std::string&, int64_t, size_t)
          -> absl::StatusOr<std::vector<v1::JobEvent>> {
        return absl::UnavailableError("disk gone");
      },
      /*tail_bytes=*/0);
  hub.Append("j", Log("a"));
  hub.Append("j", Log("b"));
  hub.Publish("j", 2);  // both dropped from memory: the budget is 0
  bool closed = false;
  EXPECT_EQ(hub.WaitForEvents("j", 1, 0, &closed).status().code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace trainctl::coordinator
