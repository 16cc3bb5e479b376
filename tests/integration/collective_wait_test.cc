// WaitForCollective between two ranks that are threads joined by Gloo over
// loopback: with an abandon check installed, a collective whose peer never
// comes (as when it is cut off without a TCP reset) ends with
// GroupAbandoned once the check says so, not at the collective timeout; a
// slow peer's collective still completes with its result; and a collective
// that fails (the peer's group closed) fails with its own error.

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <stdexcept>
#include <string>
#include <thread>

#include "worker/train/collective_group.h"
#include "worker/train/collective_wait.h"

namespace trainctl::train {
namespace {

using std::chrono::milliseconds;

class CollectiveWaitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetAbandonCheck([this]() -> std::string {
      return abandoned_.load() ? "the coordinator recovered without it" : "";
    });
  }
  void TearDown() override { SetAbandonCheck(nullptr); }

  // Both ranks' groups over one store, with a timeout far beyond the test.
  std::vector<GroupPtr> TwoGroups() {
    auto store = c10::make_intrusive<c10d::HashStore>();
    GroupOptions options;
    options.timeout = milliseconds(120'000);
    auto other = std::async(std::launch::async,
                            [&] { return MakeGlooGroup(store, 1, 2, options); });
    GroupPtr mine = MakeGlooGroup(store, 0, 2, options);
    return {mine, other.get()};
  }

  std::atomic<bool> abandoned_{false};
};

// A collective that completes just as a wait's slice runs out: Work::wait
// with a timeout throws "Operation timed out!", and by the time the work is
// asked, it is done. Its result stands (a rank used to fail at startup on
// this race, in_place_recovery_test).
class DoneAsTheSliceEnds : public c10d::Work {
 public:
  bool wait(std::chrono::milliseconds timeout) override {
    if (timeout.count() == 0) return c10d::Work::wait(timeout);  // no timeout
    finish();
    throw std::runtime_error("Operation timed out!");
  }
};

TEST_F(CollectiveWaitTest, ACollectiveDoneAsASliceEndsIsDone) {
  auto work = c10::make_intrusive<DoneAsTheSliceEnds>();
  EXPECT_NO_THROW(WaitForCollective(*work));
}

TEST_F(CollectiveWaitTest, AnAbandonedGroupsCollectiveEndsWhenTold) {
  std::vector<GroupPtr> groups = TwoGroups();
  std::vector<torch::Tensor> one{torch::ones({4})};
  auto work = groups[0]->allreduce(one);  // rank 1 never joins it
  std::thread coordinator([this] {
    std::this_thread::sleep_for(milliseconds(300));
    abandoned_.store(true);
  });
  EXPECT_THROW(WaitForCollective(*work), GroupAbandoned);
  coordinator.join();
  EXPECT_FALSE(work->isCompleted());
  // Its thread still waits on the peer: kept, not destroyed (that would
  // wait for the collective to time out).
  KeepAbandonedGroup(std::move(groups[0]));
}

TEST_F(CollectiveWaitTest, ASlowPeersCollectiveCompletesWithItsResult) {
  std::vector<GroupPtr> groups = TwoGroups();
  auto slow = std::async(std::launch::async, [&] {
    std::this_thread::sleep_for(milliseconds(350));  // several slices
    std::vector<torch::Tensor> two{torch::full({4}, 2.0)};
    WaitForCollective(*groups[1]->allreduce(two));
    return two[0];
  });
  std::vector<torch::Tensor> one{torch::ones({4})};
  WaitForCollective(*groups[0]->allreduce(one));
  EXPECT_TRUE(torch::equal(one[0], torch::full({4}, 3.0)));
  EXPECT_TRUE(torch::equal(slow.get(), torch::full({4}, 3.0)));
  for (GroupPtr& g : groups) ShutdownGroup(*g);
}

TEST_F(CollectiveWaitTest, AFailedCollectiveFailsWithItsOwnError) {
  std::vector<GroupPtr> groups = TwoGroups();
  std::vector<torch::Tensor> one{torch::ones({4})};
  auto work = groups[0]->allreduce(one);
  groups[1].reset();  // the peer's process is gone: its sockets close
  try {
    WaitForCollective(*work);
    ADD_FAILURE() << "the collective did not fail";
  } catch (const GroupAbandoned& e) {
    ADD_FAILURE() << "a failure taken for an abandoned group: " << e.what();
  } catch (const std::exception& e) {
    EXPECT_TRUE(work->isCompleted()) << e.what();
  }
}

}  // namespace
}  // namespace trainctl::train
