// Durable coordinator state end to end: kill -9 the coordinator, start it
// again on the same state dir and port, and every job is still there with
// the same ids, states, transitions and event history.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "google/protobuf/util/message_differencer.h"
#include "local_cluster.h"

namespace trainctl::testing {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;


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

TEST(CoordinatorRestartTest, Kill9KeepsEveryJobAndWorkersReturn) {
  LocalCluster cluster(2, 1, 1);
  // A job that runs to the end, then one that cannot fit (4 ranks, 2 slots).
  v1::Job done = cluster.Submit(SmallJobSpec(2, 1024, 1));
  ASSERT_FALSE(done.id().empty());
  done = cluster.WaitForJob(
      done.id(),
      [](const v1::Job& j) { return j.state() == v1::JOB_STATE_SUCCEEDED; },
      seconds(120));
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.reason();
  v1::Job queued = cluster.Submit(SmallJobSpec(4, 1024, 1));
  ASSERT_EQ(queued.state(), v1::JOB_STATE_QUEUED);
  const std::vector<v1::JobEvent> done_events = cluster.Events(done.id());
  ASSERT_GT(done_events.size(), 3u);  // transitions, metrics and logs
  const std::vector<v1::JobEvent> queued_events =
      cluster.EventsSoFar(queued.id(), std::chrono::milliseconds(500));
  // Its submission, then the scheduler's note on what it waits for.
  ASSERT_GE(queued_events.size(), 1u);
  EXPECT_TRUE(queued_events[0].has_transition());

  cluster.KillCoordinator();
  ASSERT_TRUE(cluster.RestartCoordinator());

  v1::Job done_after = cluster.GetJob(done.id());
  EXPECT_TRUE(Same(done_after, done)) << done_after.DebugString();
  EXPECT_TRUE(SameList(cluster.Events(done.id()), done_events));
  v1::Job queued_after = cluster.GetJob(queued.id());
  EXPECT_EQ(queued_after.state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(queued_after.created_unix_ms(), queued.created_unix_ms());
  EXPECT_TRUE(SameList(queued_after.transitions(), queued.transitions()));
  // The events from before are kept as they were; the restarted
  // scheduler may add notes after them (no workers yet, then workers).
  std::vector<v1::JobEvent> queued_events_after =
      cluster.EventsSoFar(queued.id(), std::chrono::milliseconds(500));
  ASSERT_GE(queued_events_after.size(), queued_events.size());
  queued_events_after.resize(queued_events.size());
  EXPECT_TRUE(SameList(queued_events_after, queued_events));

  // Ids continue; the new job waits behind the queued one (FIFO).
  v1::Job next = cluster.Submit(SmallJobSpec(1, 1024, 1));
  const int done_number = std::stoi(done.id().substr(4));
  EXPECT_EQ(next.id(), "job-" + std::to_string(done_number + 2));

  // The agents reconnect with their own backoff (at most 5 s apart).
  EXPECT_TRUE(cluster.WaitForWorkers(2, seconds(30)));
  EXPECT_EQ(cluster.GetJob(queued.id()).pending_reason(),
            "needs 4 slots and the cluster has 2 in all; it waits for more "
            "workers and holds up no other job");
}

TEST(CoordinatorRestartTest, UnreadableStateRefusesToStart) {
  const ScopedTempDir temp("trainctl-restart");
  const std::string& dir = temp.path();
  const std::string db = dir + "/coordinator.db";
  std::ofstream(db) << std::string(8192, '#');
  Process coordinator({std::string(TRAINCTL_BIN_DIR) + "/trainctl-coordinator",
                       "--listen", "127.0.0.1:0", "--state-dir", dir},
                      dir + "/coordinator.log");
  EXPECT_EQ(coordinator.Wait(seconds(20)), 1);
  std::ifstream in(dir + "/coordinator.log");
  const std::string log((std::istreambuf_iterator<char>(in)),
                        std::istreambuf_iterator<char>());
  EXPECT_THAT(log, HasSubstr(db));
  EXPECT_THAT(log, HasSubstr("not a database"));
  EXPECT_THAT(log, HasSubstr("move it aside"));
}

}  // namespace
}  // namespace trainctl::testing
