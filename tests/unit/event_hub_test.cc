// EventHub: what watchers see (published events only, in seq order, in
// bounded batches) and when a wait ends (publish, close, forget).

#include "coordinator/event_hub.h"

#include <future>

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

TEST(EventHubTest, ShowsOnlyPublishedEventsInOrder) {
  EventHub hub;
  EXPECT_EQ(hub.Append("j1", Log("a")), 1);
  EXPECT_EQ(hub.Append("j1", Log("b")), 2);
  EXPECT_EQ(hub.Append("j2", Log("c")), 1);  // seq is per job
  bool closed = true;
  EXPECT_TRUE(hub.WaitForEvents("j1", 1, 0, &closed).empty());
  EXPECT_FALSE(closed);
  hub.Publish("j1", 1);
  std::vector<v1::JobEvent> seen = hub.WaitForEvents("j1", 1, 0, &closed);
  ASSERT_EQ(Seqs(seen), (std::vector<int64_t>{1}));
  EXPECT_EQ(seen[0].job_id(), "j1");
  EXPECT_EQ(seen[0].log().text(), "a");
  hub.Publish("j1", 9);  // never past what exists
  EXPECT_EQ(Seqs(hub.WaitForEvents("j1", 1, 0, &closed)),
            (std::vector<int64_t>{1, 2}));
  hub.Publish("j1", 1);  // never lowers what is visible
  EXPECT_EQ(Seqs(hub.WaitForEvents("j1", 2, 0, &closed)),
            (std::vector<int64_t>{2}));
  EXPECT_TRUE(hub.WaitForEvents("j2", 1, 0, &closed).empty());
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
  EXPECT_EQ(Seqs(hub.WaitForEvents("j", 1, 0, &closed, 2)),
            (std::vector<int64_t>{1, 2}));
  EXPECT_FALSE(closed);  // three more to read
  EXPECT_EQ(Seqs(hub.WaitForEvents("j", 3, 0, &closed, 2)),
            (std::vector<int64_t>{3, 4}));
  EXPECT_FALSE(closed);
  EXPECT_EQ(Seqs(hub.WaitForEvents("j", 5, 0, &closed, 2)),
            (std::vector<int64_t>{5}));
  EXPECT_TRUE(closed);
  EXPECT_TRUE(hub.WaitForEvents("j", 6, 0, &closed, 2).empty());
  EXPECT_TRUE(closed);
}

TEST(EventHubTest, AClosedLogIsCompleteOnlyOnceEverythingIsPublished) {
  EventHub hub;
  hub.Append("j", Log("a"));
  hub.Append("j", Log("b"));
  hub.Close("j");
  bool closed = true;
  EXPECT_TRUE(hub.WaitForEvents("j", 1, 0, &closed).empty());
  EXPECT_FALSE(closed);  // b is not durable yet
  hub.Publish("j", 2);
  EXPECT_EQ(hub.WaitForEvents("j", 1, 0, &closed).size(), 2u);
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
        return hub.WaitForEvents("j", 1, 60'000, &closed);
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
    hub.WaitForEvents("j", 2, 60'000, &closed);  // waits for seq 2
    return closed;
  });
  // Until the waiter is in, a Forget before it reads the missing log the
  // same way: closed either way.
  hub.Forget("j");
  EXPECT_TRUE(waiting.get());
  bool closed = false;
  EXPECT_TRUE(hub.WaitForEvents("j", 1, 0, &closed).empty());
  EXPECT_TRUE(closed);
}

TEST(EventHubTest, RestoreKeepsStoredSeqsAndRefusesGaps) {
  EventHub hub;
  std::vector<v1::JobEvent> stored{Log("a"), Log("b")};
  stored[0].set_seq(1);
  stored[1].set_seq(2);
  ASSERT_TRUE(hub.Restore("j", stored, /*closed=*/false).ok());
  EXPECT_EQ(hub.Append("j", Log("c")), 3);
  bool closed = true;
  EXPECT_EQ(hub.WaitForEvents("j", 1, 0, &closed).size(), 2u);  // restored = published
  stored[1].set_seq(3);
  EXPECT_EQ(hub.Restore("k", stored, false).code(),
            absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace trainctl::coordinator
