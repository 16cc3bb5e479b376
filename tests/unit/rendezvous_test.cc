#include "coordinator/rendezvous.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include <future>
#include <chrono>
#include <vector>
#include <thread>

namespace trainctl::coordinator {
namespace {

using ::testing::HasSubstr;

const Rendezvous::Scope kGen1{"job-1", 1};
const Rendezvous::Scope kGen2{"job-1", 2};

TEST(RendezvousTest, SetGetWithinScopeOnly) {
  Rendezvous r;
  ASSERT_TRUE(r.Set(kGen1, "k", "v").ok());
  EXPECT_EQ(*r.Get(kGen1, "k", 0), "v");
  absl::StatusOr<std::string> other = r.Get(kGen2, "k", 10);
  EXPECT_EQ(other.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(other.status().message().find("'k' of job job-1 generation 2"),
            std::string::npos);
}

TEST(RendezvousTest, GetBlocksUntilAnotherThreadSets) {
  Rendezvous r;
  auto pending = std::async(std::launch::async,
                            [&] { return r.Get(kGen1, "late", 60'000); });
  ASSERT_TRUE(r.Set(kGen1, "late", "here").ok());
  absl::StatusOr<std::string> got = pending.get();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "here");
}

TEST(RendezvousTest, WaitNamesMissingKeys) {
  Rendezvous r;
  ASSERT_TRUE(r.Set(kGen1, "a", "1").ok());
  absl::Status s = r.Wait(kGen1, {"a", "b", "c"}, 10);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("[b, c]"), std::string::npos) << s.message();
  ASSERT_TRUE(r.Set(kGen1, "b", "").ok());
  ASSERT_TRUE(r.Set(kGen1, "c", "").ok());
  EXPECT_TRUE(r.Wait(kGen1, {"a", "b", "c"}, 10).ok());
  EXPECT_TRUE(r.Check(kGen1, {"a", "b"}));
  EXPECT_FALSE(r.Check(kGen2, {"a"}));
}

TEST(RendezvousTest, AddCounts) {
  Rendezvous r;
  EXPECT_EQ(*r.Add(kGen1, "n", 1), 1);
  EXPECT_EQ(*r.Add(kGen1, "n", 5), 6);
  ASSERT_TRUE(r.Set(kGen1, "text", "abc").ok());
  EXPECT_EQ(r.Add(kGen1, "text", 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RendezvousTest, CompareSetFollowsC10dConvention) {
  Rendezvous r;
  EXPECT_EQ(*r.CompareSet(kGen1, "k", "x", "y"), "x");  // absent, expected != ""
  EXPECT_EQ(r.NumKeys(kGen1), 0);
  EXPECT_EQ(*r.CompareSet(kGen1, "k", "", "first"), "first");
  EXPECT_EQ(*r.CompareSet(kGen1, "k", "wrong", "second"), "first");
  EXPECT_EQ(*r.CompareSet(kGen1, "k", "first", "second"), "second");
}

TEST(RendezvousTest, DeleteAndDropJob) {
  Rendezvous r;
  ASSERT_TRUE(r.Set(kGen1, "a", "1").ok());
  ASSERT_TRUE(r.Set(kGen2, "b", "2").ok());
  ASSERT_TRUE(r.Set({"job-2", 1}, "c", "3").ok());
  EXPECT_TRUE(r.Delete(kGen1, "a"));
  EXPECT_FALSE(r.Delete(kGen1, "a"));
  r.DropJob("job-1");
  EXPECT_EQ(r.NumKeys(kGen2), 0);
  EXPECT_EQ(r.NumKeys({"job-2", 1}), 1);
  // A straggler of the dropped job cannot bring its scope back.
  absl::Status late = r.Set(kGen2, "b", "again");
  EXPECT_EQ(late.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.NumKeys(kGen2), 0);
}

TEST(RendezvousTest, AnEndedGenerationIsClosedAndTheNextOneOpen) {
  Rendezvous r;
  ASSERT_TRUE(r.Set(kGen1, "a", "1").ok());
  auto waiting = std::async(std::launch::async,
                            [&] { return r.Wait(kGen1, {"never"}, 600'000); });
  r.EndGeneration("job-1", 1);
  EXPECT_EQ(waiting.get().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.Set(kGen1, "a", "2").code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.Add(kGen1, "n", 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(r.Get(kGen1, "a", 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(r.Set(kGen2, "a", "3").ok());
}

// In-place recovery: a survivor waits for its place in the next generation;
// one that has none, or whose generation ended without a regroup, hears so.
TEST(RendezvousTest, ASurvivorWaitsForItsPlaceInTheNextGeneration) {
  Rendezvous r;
  auto waiting = std::async(std::launch::async,
                            [&] { return r.AwaitRegroup(kGen1, 2, 60'000); });
  r.PostRegroup(kGen1, {{0, {2, 0, 2}}, {2, {2, 1, 2}}});
  r.EndGeneration("job-1", 1);
  absl::StatusOr<Rendezvous::RegroupPlace> place = waiting.get();
  ASSERT_TRUE(place.ok()) << place.status();
  EXPECT_EQ(place->generation, 2);
  EXPECT_EQ(place->rank, 1);
  EXPECT_EQ(place->world_size, 2);
  absl::Status left_out = r.AwaitRegroup(kGen1, 1, 0).status();
  EXPECT_EQ(left_out.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(left_out.message(), HasSubstr("rank 1 of job job-1 generation 1 has no place"));
  // Generation 2 has not been regrouped: nothing yet, then its end says so.
  EXPECT_EQ(r.AwaitRegroup(kGen2, 0, 10).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  r.EndGeneration("job-1", 2);
  absl::Status ended = r.AwaitRegroup(kGen2, 0, 60'000).status();
  EXPECT_EQ(ended.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(ended.message(), HasSubstr("ended without in-place recovery"));
  r.DropJob("job-1");
  EXPECT_EQ(r.AwaitRegroup(kGen1, 2, 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// Generation 2 lost a rank while it formed and regrouped again: a survivor
// of generation 1 that asks only now gets its place in generation 3.
TEST(RendezvousTest, ALateSurvivorGetsItsLatestPlace) {
  Rendezvous r;
  r.PostRegroup(kGen1, {{0, {2, 0, 3}}, {1, {2, 1, 3}}});
  r.EndGeneration("job-1", 1);
  r.PostRegroup(kGen2, {{0, {3, 0, 3}}});  // rank 1 of generation 2 was lost
  r.EndGeneration("job-1", 2);
  absl::StatusOr<Rendezvous::RegroupPlace> place = r.AwaitRegroup(kGen1, 0, 0);
  ASSERT_TRUE(place.ok()) << place.status();
  EXPECT_EQ(place->generation, 3);
  EXPECT_EQ(place->rank, 0);
  EXPECT_EQ(place->world_size, 3);
  place = r.AwaitRegroup(kGen2, 0, 0);
  ASSERT_TRUE(place.ok()) << place.status();
  EXPECT_EQ(place->generation, 3);
  absl::Status gone = r.AwaitRegroup(kGen1, 1, 0).status();
  EXPECT_EQ(gone.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(gone.message(), HasSubstr("rank 1 of job job-1 generation 2 has no place"));
}

TEST(RendezvousTest, KeysAndBytesAreBounded) {
  Rendezvous r;
  EXPECT_EQ(r.Set(kGen1, "big",
                  std::string(Rendezvous::kMaxValueBytes + 1, 'x')).code(),
            absl::StatusCode::kResourceExhausted);
  for (int64_t i = 0; i < Rendezvous::kMaxKeysPerScope; ++i) {
    ASSERT_TRUE(r.Set(kGen1, std::to_string(i), "").ok());
  }
  absl::Status full = r.Set(kGen1, "one-more", "");
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("keys"), std::string::npos);
  EXPECT_TRUE(r.Set(kGen1, "0", "replacing is fine").ok());
  const std::string mib(Rendezvous::kMaxValueBytes - 16, 'x');
  for (int i = 0; i < 64; ++i) {  // just under 64 MiB with the keys
    ASSERT_TRUE(r.Set(kGen2, "v" + std::to_string(i), mib).ok());
  }
  EXPECT_EQ(r.Set(kGen2, "v-last", mib).code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(RendezvousTest, ShutdownReleasesWaiters) {
  Rendezvous r;
  auto pending = std::async(std::launch::async,
                            [&] { return r.Wait(kGen1, {"never"}, 600'000); });
  r.Shutdown();
  EXPECT_EQ(pending.get().code(), absl::StatusCode::kUnavailable);
}

// Each waiting call holds a server thread: a generation's key holder may
// keep only as many waiting as its world size needs.
TEST(RendezvousTest, WaitingCallsAreBoundedByTheWorldSize) {
  Rendezvous r;
  r.ExpectWorld(kGen1, 2);  // 2 x 2 + 16 = 20
  std::vector<std::future<absl::Status>> waiting;
  for (int i = 0; i < 20; ++i) {
    waiting.push_back(std::async(std::launch::async, [&r] {
      return r.Wait(kGen1, {"never"}, 600'000);
    }));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (r.Waiters(kGen1) < 20 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(r.Waiters(kGen1), 20);
  absl::Status refused = r.Wait(kGen1, {"never"}, 600'000);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(r.Get(kGen1, "never", 600'000).status().code(),
            absl::StatusCode::kResourceExhausted);
  // Another generation has room of its own.
  EXPECT_EQ(r.Wait(kGen2, {"never"}, 0).code(),
            absl::StatusCode::kDeadlineExceeded);
  r.EndGeneration("job-1", 1);  // releases them all
  for (auto& w : waiting) {
    EXPECT_EQ(w.get().code(), absl::StatusCode::kFailedPrecondition);
  }
  EXPECT_EQ(r.Waiters(kGen1), 0);
}

// A journal in memory, as the job store would keep it.
class FakeJournal : public RendezvousJournal {
 public:
  absl::Status Put(const std::string& job, int generation, const std::string& key,
                   const std::string& value) override {
    if (refuse) return absl::UnavailableError("disk full");
    kept[{job, generation, key}] = value;
    return absl::OkStatus();
  }
  void Erase(const std::string& job, int generation,
             const std::string& key) override {
    kept.erase({job, generation, key});
  }
  void Drop(const std::string& job, int below) override {
    ++drops;
    for (auto it = kept.begin(); it != kept.end();) {
      it = std::get<0>(it->first) == job && std::get<1>(it->first) < below
               ? kept.erase(it)
               : std::next(it);
    }
  }
  bool refuse = false;
  int drops = 0;
  std::map<std::tuple<std::string, int, std::string>, std::string> kept;
};

// Ending a job that never set a key asks nothing of the journal (it runs
// under the JobManager's lock at every job end); a restored key counts.
TEST(RendezvousTest, AJobWithoutKeysEndsWithoutAJournalCall) {
  FakeJournal journal;
  Rendezvous r(&journal);
  r.ExpectWorld({"job-1", 1}, 8);
  r.EndGeneration("job-1", 1);
  r.DropJob("job-1");
  EXPECT_EQ(journal.drops, 0);
  r.Restore({"job-2", 1}, {{"addr/0", "10.0.0.1:4000"}});
  r.DropJob("job-2");
  EXPECT_EQ(journal.drops, 1);
}

TEST(RendezvousTest, EveryKeyChangeIsJournaledFirst) {
  FakeJournal journal;
  Rendezvous r(&journal);
  const Rendezvous::Scope g1{"job-1", 1}, g2{"job-1", 2};
  ASSERT_TRUE(r.Set(g1, "addr/0", "10.0.0.1:4000").ok());
  ASSERT_EQ(*r.Add(g1, "count", 2), 2);
  ASSERT_EQ(*r.CompareSet(g1, "cas", "", "x"), "x");
  ASSERT_TRUE(r.Set(g2, "addr/0", "10.0.0.2:4000").ok());
  EXPECT_EQ(journal.kept.size(), 4u);
  EXPECT_EQ((journal.kept[{"job-1", 1, "count"}]), "2");
  EXPECT_TRUE(r.Delete(g1, "cas"));
  EXPECT_EQ(journal.kept.count({"job-1", 1, "cas"}), 0u);
  // A change the journal refuses is not made.
  journal.refuse = true;
  absl::Status refused = r.Set(g1, "addr/1", "10.0.0.3:4000");
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("disk full"));
  EXPECT_FALSE(r.Check(g1, {"addr/1"}));
  EXPECT_EQ(r.Add(g1, "count", 1).status().code(), absl::StatusCode::kUnavailable);
  journal.refuse = false;
  EXPECT_EQ(*r.Add(g1, "count", 0), 2);
  // An ended generation's keys leave the journal; the next one's stay.
  r.EndGeneration("job-1", 1);
  EXPECT_EQ(journal.kept.count({"job-1", 1, "addr/0"}), 0u);
  EXPECT_EQ(journal.kept.count({"job-1", 2, "addr/0"}), 1u);
  r.DropJob("job-1");
  EXPECT_TRUE(journal.kept.empty());
}

TEST(RendezvousTest, RestoredKeysAnswerWaitersAsIfSetBeforeTheRestart) {
  Rendezvous r;
  const Rendezvous::Scope g1{"job-1", 1};
  r.Restore(g1, {{"addr/0", "10.0.0.1:4000"}, {"count", "2"}});
  EXPECT_EQ(*r.Get(g1, "addr/0", 0), "10.0.0.1:4000");
  EXPECT_TRUE(r.Wait(g1, {"addr/0", "count"}, 0).ok());
  EXPECT_EQ(*r.Add(g1, "count", 1), 3);
  EXPECT_EQ(r.NumKeys(g1), 2);
}

}  // namespace
}  // namespace trainctl::coordinator
