#include "coordinator/rendezvous.h"

#include <gtest/gtest.h>

#include <future>

namespace trainctl::coordinator {
namespace {

const Rendezvous::Scope kGen1{"job-1", 1};
const Rendezvous::Scope kGen2{"job-1", 2};

TEST(RendezvousTest, SetGetWithinScopeOnly) {
  Rendezvous r;
  r.Set(kGen1, "k", "v");
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
  r.Set(kGen1, "late", "here");
  absl::StatusOr<std::string> got = pending.get();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, "here");
}

TEST(RendezvousTest, WaitNamesMissingKeys) {
  Rendezvous r;
  r.Set(kGen1, "a", "1");
  absl::Status s = r.Wait(kGen1, {"a", "b", "c"}, 10);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("[b, c]"), std::string::npos) << s.message();
  r.Set(kGen1, "b", "");
  r.Set(kGen1, "c", "");
  EXPECT_TRUE(r.Wait(kGen1, {"a", "b", "c"}, 10).ok());
  EXPECT_TRUE(r.Check(kGen1, {"a", "b"}));
  EXPECT_FALSE(r.Check(kGen2, {"a"}));
}

TEST(RendezvousTest, AddCounts) {
  Rendezvous r;
  EXPECT_EQ(*r.Add(kGen1, "n", 1), 1);
  EXPECT_EQ(*r.Add(kGen1, "n", 5), 6);
  r.Set(kGen1, "text", "abc");
  EXPECT_EQ(r.Add(kGen1, "text", 1).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RendezvousTest, CompareSetFollowsC10dConvention) {
  Rendezvous r;
  EXPECT_EQ(r.CompareSet(kGen1, "k", "x", "y"), "x");  // absent, expected != ""
  EXPECT_EQ(r.NumKeys(kGen1), 0);
  EXPECT_EQ(r.CompareSet(kGen1, "k", "", "first"), "first");
  EXPECT_EQ(r.CompareSet(kGen1, "k", "wrong", "second"), "first");
  EXPECT_EQ(r.CompareSet(kGen1, "k", "first", "second"), "second");
}

TEST(RendezvousTest, DeleteAndDropJob) {
  Rendezvous r;
  r.Set(kGen1, "a", "1");
  r.Set(kGen2, "b", "2");
  r.Set({"job-2", 1}, "c", "3");
  EXPECT_TRUE(r.Delete(kGen1, "a"));
  EXPECT_FALSE(r.Delete(kGen1, "a"));
  r.DropJob("job-1");
  EXPECT_EQ(r.NumKeys(kGen2), 0);
  EXPECT_EQ(r.NumKeys({"job-2", 1}), 1);
}

TEST(RendezvousTest, ShutdownReleasesWaiters) {
  Rendezvous r;
  auto pending = std::async(std::launch::async,
                            [&] { return r.Wait(kGen1, {"never"}, 600'000); });
  r.Shutdown();
  EXPECT_EQ(pending.get().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace trainctl::coordinator
