// The c10d::Store that ranks use, against a real coordinator served on an
// ephemeral loopback port, and a real Gloo process group rendezvousing
// through it with ranks as threads.

#include "common/clock.h"
#include "worker/train/collective_group.h"
#include "worker/train/rendezvous_store.h"

#include <gtest/gtest.h>
#include <grpcpp/create_channel.h>
#include <torch/torch.h>

#include <future>
#include <thread>

#include "coordinator/coordinator_server.h"

namespace trainctl::train {
namespace {

using std::chrono::milliseconds;

class RendezvousStoreTest : public ::testing::Test {
 protected:
  static constexpr char kSecret[] = "rendezvous-secret-for-tests";
  void SetUp() override {
    coordinator::CoordinatorOptions options;
    options.listen = "127.0.0.1:0";
    server_ = std::make_unique<coordinator::CoordinatorServer>(
        options, clock_, nullptr, coordinator::Security::Insecure(kSecret));
    absl::StatusOr<int> port = server_->Start();
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(*port),
                                   grpc::InsecureChannelCredentials());
  }

  // A new coordinator on the same port, as after a restart.
  void RestartServer() {
    server_->Shutdown();
    server_.reset();
    coordinator::CoordinatorOptions options;
    options.listen = "127.0.0.1:" + std::to_string(port_);
    // The same secret, as a restarted coordinator reads it from its state
    // directory: the ranks' keys stay valid.
    server_ = std::make_unique<coordinator::CoordinatorServer>(
        options, clock_, nullptr, coordinator::Security::Insecure(kSecret));
    absl::StatusOr<int> port = server_->Start();
    ASSERT_TRUE(port.ok()) << port.status();
  }

  c10::intrusive_ptr<RendezvousStore> Store(int generation,
                                            milliseconds timeout) {
    return c10::make_intrusive<RendezvousStore>(
        v1::Rendezvous::NewStub(channel_), "job-1", generation,
        server_->authenticator().RendezvousKey("job-1", generation), timeout);
  }

  static std::vector<uint8_t> Bytes(const std::string& s) {
    return {s.begin(), s.end()};
  }

  RealClock clock_;
  int port_ = 0;
  std::unique_ptr<coordinator::CoordinatorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(RendezvousStoreTest, KeyValueOperations) {
  auto store = Store(1, milliseconds(5'000));
  store->set("a", Bytes("1"));
  EXPECT_EQ(store->get("a"), Bytes("1"));
  EXPECT_EQ(store->add("n", 2), 2);
  EXPECT_EQ(store->add("n", 3), 5);
  EXPECT_TRUE(store->check({"a", "n"}));
  EXPECT_FALSE(store->check({"a", "missing"}));
  EXPECT_EQ(store->getNumKeys(), 2);
  EXPECT_EQ(store->compareSet("a", Bytes("1"), Bytes("2")), Bytes("2"));
  EXPECT_TRUE(store->deleteKey("a"));
  EXPECT_FALSE(store->deleteKey("a"));
}

TEST_F(RendezvousStoreTest, GenerationsDoNotShareKeys) {
  Store(1, milliseconds(5'000))->set("k", Bytes("old"));
  auto next = Store(2, milliseconds(50));
  EXPECT_FALSE(next->check({"k"}));
  try {
    next->get("k");
    FAIL() << "get of a key absent in this generation must time out";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("did not appear within 50 ms"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(RendezvousStoreTest, WaitBlocksUntilAnotherClientSets) {
  auto waiter = Store(1, milliseconds(30'000));
  auto setter = Store(1, milliseconds(30'000));
  auto pending = std::async(std::launch::async, [&] { waiter->wait({"x"}); });
  setter->set("x", Bytes("done"));
  pending.get();  // throws if the wait failed
  EXPECT_EQ(waiter->get("x"), Bytes("done"));
}

// A wait that the coordinator's going away ended (UNAVAILABLE) is made
// again on the coordinator that comes back, and ends when the key is set
// there; the rank does not fail.
TEST_F(RendezvousStoreTest, AWaitOutlastsACoordinatorRestart) {
  auto waiter = Store(1, milliseconds(30'000));
  auto pending = std::async(std::launch::async, [&] { waiter->wait({"late"}); });
  // The wait is on the server before it goes (bounded: 30 s).
  for (int i = 0; i < 3000 && server_->rendezvous().Waiters({"job-1", 1}) == 0;
       ++i) {
    std::this_thread::sleep_for(milliseconds(10));
  }
  ASSERT_EQ(server_->rendezvous().Waiters({"job-1", 1}), 1);
  RestartServer();
  Store(1, milliseconds(30'000))->set("late", Bytes("here"));
  pending.get();  // throws if the wait failed
  EXPECT_EQ(waiter->get("late"), Bytes("here"));
}

TEST_F(RendezvousStoreTest, GlooRanksRendezvousAndAllReduce) {
  constexpr int kWorld = 3;
  std::vector<std::future<std::vector<float>>> ranks;
  for (int rank = 0; rank < kWorld; ++rank) {
    ranks.push_back(std::async(std::launch::async, [this, rank] {
      GroupOptions options;
      options.timeout = milliseconds(30'000);
      GroupPtr group =
          MakeGlooGroup(Store(1, milliseconds(30'000)), rank, kWorld, options);
      std::vector<torch::Tensor> t{torch::full({4}, float(rank + 1))};
      group->allreduce(t)->wait();
      return std::vector<float>(t[0].data_ptr<float>(),
                                t[0].data_ptr<float>() + 4);
    }));
  }
  for (auto& r : ranks) {
    EXPECT_EQ(r.get(), std::vector<float>(4, 6.0f));  // 1 + 2 + 3
  }
}

}  // namespace
}  // namespace trainctl::train
