// A rank's training state sent over a Gloo group to the ranks behind it,
// between ranks that are threads of this process: a taker ends with the
// sender's model, optimizer state and cursor exactly, whether it had no
// state (a replacement) or an older one (a survivor a step behind); a rank
// that is not a taker is not involved; a taker whose model differs refuses
// before anything of it changes, and the sender goes on; a lost sender is
// UNAVAILABLE to its taker, not a hang, and one lost halfway leaves the
// taker's state as it was. As in an in-place job's ranks, an abandon check
// is installed (collective_wait.h): a transfer whose peer is cut off ends
// on both sides once the check says so, the taker's state unchanged.

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/spec.h"
#include "worker/train/collective_group.h"
#include "worker/train/collective_wait.h"
#include "worker/train/models/model.h"
#include "worker/train/optim/optimizer_state.h"
#include "worker/train/optim/optimizers.h"
#include "worker/train/state_transfer.h"

namespace trainctl::train {
namespace {

constexpr int kWorld = 3;
constexpr char kData[] = "/usr/share/datasets/fashion-mnist/";

v1::JobSpec Spec(const std::string& optimizer, int hidden) {
  const std::string text =
      "ranks: 3\nseed: 5\nmodel: {type: mlp, hidden: [" + std::to_string(hidden) + "]}\n"
      "data:\n  train_images: " + std::string(kData) + "train-images-idx3-ubyte.gz\n"
      "  train_labels: " + std::string(kData) + "train-labels-idx1-ubyte.gz\n"
      "optimizer: " + optimizer + "\ntraining: {batch_size: 48}\n";
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(text);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

// One rank's model and optimizer on Fashion-MNIST's shapes, trained
// `steps` optimizer steps on random batches drawn from `seed`.
struct Rank {
  Rank(const v1::JobSpec& spec, int seed, int steps) {
    torch::manual_seed(seed);
    DataInfo info;
    info.input_shape = {784};
    info.num_classes = 10;
    absl::StatusOr<std::unique_ptr<Model>> built = BuildModel(spec, info);
    EXPECT_TRUE(built.ok()) << built.status();
    model = std::move(*built);
    params = model->Parameters();
    optimizer = BuildOptimizer(spec.optimizer(), params);
    for (int s = 0; s < steps; ++s) {
      optimizer->zero_grad();
      model->Forward(torch::randn({8, 784})).pow(2).mean().backward();
      optimizer->step();
    }
  }
  TrainingStateRefs Refs() { return {model.get(), optimizer.get(), params, nullptr}; }
  std::vector<torch::Tensor> ModelTensors() {
    std::vector<torch::Tensor> out;
    for (auto& [name, t] : model->NamedState()) out.push_back(t.detach().clone());
    return out;
  }

  std::unique_ptr<Model> model;
  std::vector<torch::Tensor> params;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
};

// The bytes of a rank's model and optimizer state tensors.
int64_t StateBytes(Rank& r) {
  int64_t bytes = 0;
  for (auto& [name, t] : r.model->NamedState()) bytes += static_cast<int64_t>(t.nbytes());
  for (const ParamOptimizerState& p : ExportOptimizerState(*r.optimizer, r.params)) {
    for (const auto& [field, t] : p.tensors) bytes += static_cast<int64_t>(t.nbytes());
  }
  return bytes;
}

void ExpectSameModel(const std::vector<torch::Tensor>& a, const std::vector<torch::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_TRUE(torch::equal(a[i], b[i])) << "tensor " << i;
}

void ExpectSameOptimizerState(const std::vector<ParamOptimizerState>& x,
                              const std::vector<ParamOptimizerState>& y) {
  ASSERT_EQ(x.size(), y.size());
  for (size_t i = 0; i < x.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(x[i].present, y[i].present);
    EXPECT_EQ(x[i].step, y[i].step);
    ASSERT_EQ(x[i].tensors.size(), y[i].tensors.size());
    for (const auto& [field, t] : x[i].tensors) {
      ASSERT_TRUE(y[i].tensors.count(field)) << field;
      EXPECT_TRUE(torch::equal(t, y[i].tensors.at(field))) << field;
    }
  }
}

void ExpectSameOptimizerState(Rank& a, Rank& b) {
  ExpectSameOptimizerState(ExportOptimizerState(*a.optimizer, a.params),
                           ExportOptimizerState(*b.optimizer, b.params));
}

// A sender's group that passes its first `sends` sends on (each waited
// here, so it has arrived; a Gloo work is waited once, so the caller gets
// one that is done), then fails the rest as a process that died (`lost`),
// or never sends them, as one cut off without a TCP reset: their works
// finish only when aborted.
class SendsThenStops : public CollectiveGroup {
 public:
  SendsThenStops(GroupPtr inner, int sends, bool lost)
      : CollectiveGroup(inner->getRank(), inner->getSize()),
        inner_(std::move(inner)), sends_(sends), lost_(lost) {}

  const std::string getBackendName() const override { return "test"; }

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int to,
                                      int tag) override {
    if (sends_-- > 0) {
      inner_->send(tensors, to, tag)->wait();
      return c10::make_intrusive<Delivered>();
    }
    if (lost_) throw std::runtime_error("test: the sender's process died");
    return c10::make_intrusive<NeverSent>();
  }
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int from,
                                      int tag) override {
    return inner_->recv(tensors, from, tag);
  }

 private:
  class Delivered : public c10d::Work {
   public:
    Delivered() { finish(); }
  };
  class NeverSent : public c10d::Work {
   public:
    void abort() override { finish(); }
  };

  GroupPtr inner_;
  int sends_;
  bool lost_;
};

// Installed for every test, as rank_main does for an in-place job.
class StateTransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SetAbandonCheck([this]() -> std::string {
      return abandoned_.load() ? "the coordinator recovered without this rank's group" : "";
    });
  }
  void TearDown() override { SetAbandonCheck(nullptr); }

  std::atomic<bool> abandoned_{false};
};

// What each rank's call returned; ranks not sending nor taking call nothing.
struct Outcome {
  absl::Status sent;
  StateTransferStats sender_stats;
  std::vector<StateTransferStats> taker_stats{kWorld};
  std::vector<absl::StatusOr<TrainingCursor>> taken{kWorld, absl::UnknownError("not a taker")};
};

// `source` sends ranks[source]'s state, at `cursor`, to `takers`.
Outcome Transfer(std::vector<Rank*> ranks, int source, const std::vector<int>& takers,
                 const TrainingCursor& cursor) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  Outcome out;
  std::vector<std::future<void>> threads;
  for (int rank = 0; rank < kWorld; ++rank) {
    threads.push_back(std::async(std::launch::async, [&, rank] {
      GroupPtr group = MakeGlooGroup(store, rank, kWorld, {});
      const bool taker = std::find(takers.begin(), takers.end(), rank) != takers.end();
      if (rank == source) {
        out.sent = SendTrainingState(*group, takers, ranks[rank]->Refs(), cursor,
                                     &out.sender_stats);
      } else if (taker) {
        out.taken[rank] =
            ReceiveTrainingState(*group, source, ranks[rank]->Refs(), &out.taker_stats[rank]);
      }
      // A barrier before the groups close: no rank's socket is shut while
      // a peer still reads from it.
      std::vector<torch::Tensor> one{torch::zeros({1})};
      group->allreduce(one)->wait();
      ShutdownGroup(*group);
    }));
  }
  for (auto& t : threads) t.get();
  return out;
}

TEST_F(StateTransferTest, ATakerEndsWithTheSendersModelOptimizerAndCursor) {
  for (const std::string optimizer :
       {"{type: adamw, lr: 0.01}", "{type: adafactor}", "{type: adam8bit, lr: 0.001}",
        "{type: sgd, lr: 0.1, momentum: 0.9}"}) {
    SCOPED_TRACE(optimizer);
    const v1::JobSpec spec = Spec(optimizer, 64);
    Rank behind(spec, /*seed=*/1, /*steps=*/2);   // a survivor one step behind
    Rank source(spec, /*seed=*/2, /*steps=*/3);
    Rank newcomer(spec, /*seed=*/3, /*steps=*/0);  // a replacement: no state
    const std::vector<torch::Tensor> sent = source.ModelTensors();
    TrainingCursor cursor;
    cursor.step = 3;
    cursor.epoch = 1;
    cursor.samples_in_epoch = 144;
    cursor.global_batch = 48;
    cursor.train_samples = 60000;
    cursor.world_size = 3;
    const Outcome out = Transfer({&behind, &source, &newcomer}, 1, {0, 2}, cursor);
    ASSERT_TRUE(out.sent.ok()) << out.sent;
    EXPECT_TRUE(out.sender_stats.refused.empty());
    EXPECT_EQ(out.sender_stats.bytes, StateBytes(source));
    for (int taker : {0, 2}) {
      SCOPED_TRACE(taker);
      ASSERT_TRUE(out.taken[taker].ok()) << out.taken[taker].status();
      EXPECT_EQ(out.taker_stats[taker].bytes, out.sender_stats.bytes);
      EXPECT_EQ(out.taken[taker]->step, 3);
      EXPECT_EQ(out.taken[taker]->epoch, 1);
      EXPECT_EQ(out.taken[taker]->samples_in_epoch, 144);
      EXPECT_EQ(out.taken[taker]->world_size, 3);
    }
    ExpectSameModel(behind.ModelTensors(), sent);
    ExpectSameModel(newcomer.ModelTensors(), sent);
    ExpectSameModel(source.ModelTensors(), sent);  // the sender's is untouched
    ExpectSameOptimizerState(behind, source);
    ExpectSameOptimizerState(newcomer, source);
    // The taken state trains on as the sender's does.
    for (Rank* r : {&source, &newcomer}) {
      torch::manual_seed(9);
      r->optimizer->zero_grad();
      r->model->Forward(torch::randn({8, 784})).pow(2).mean().backward();
      r->optimizer->step();
    }
    ExpectSameModel(newcomer.ModelTensors(), source.ModelTensors());
  }
}

TEST_F(StateTransferTest, ARankThatIsNoTakerKeepsItsOwnState) {
  const v1::JobSpec spec = Spec("{type: adamw, lr: 0.01}", 64);
  Rank source(spec, 2, 3), taker(spec, 3, 0), bystander(spec, 4, 3);
  const std::vector<torch::Tensor> own = bystander.ModelTensors();
  const Outcome out = Transfer({&source, &taker, &bystander}, 0, {1}, TrainingCursor{});
  ASSERT_TRUE(out.sent.ok()) << out.sent;
  ASSERT_TRUE(out.taken[1].ok()) << out.taken[1].status();
  ExpectSameModel(bystander.ModelTensors(), own);
  ExpectSameModel(taker.ModelTensors(), source.ModelTensors());
}

TEST_F(StateTransferTest, ATakerOfAnotherModelRefusesUnchangedAndTheSenderGoesOn) {
  Rank source(Spec("{type: adamw, lr: 0.01}", 64), 2, 3);
  Rank other(Spec("{type: adamw, lr: 0.01}", 32), 3, 1);
  Rank same(Spec("{type: adamw, lr: 0.01}", 64), 4, 0);
  const std::vector<torch::Tensor> own = other.ModelTensors();
  const Outcome out = Transfer({&source, &other, &same}, 0, {1, 2}, TrainingCursor{});
  ASSERT_TRUE(out.sent.ok()) << out.sent;
  EXPECT_EQ(out.sender_stats.refused, std::vector<int>{1});
  ASSERT_EQ(out.taken[1].status().code(), absl::StatusCode::kInvalidArgument);
  const std::string why(out.taken[1].status().message());
  EXPECT_NE(why.find("rank 0's model tensor 0 is"), std::string::npos) << why;
  EXPECT_NE(why.find("[64, 784]"), std::string::npos) << why;
  EXPECT_NE(why.find("[32, 784]"), std::string::npos) << why;
  ExpectSameModel(other.ModelTensors(), own);
  // The other taker still got it.
  ASSERT_TRUE(out.taken[2].ok()) << out.taken[2].status();
  ExpectSameModel(same.ModelTensors(), source.ModelTensors());
}

TEST_F(StateTransferTest, ALostSenderIsUnavailableToItsTakerNotAHang) {
  const v1::JobSpec spec = Spec("{type: adamw, lr: 0.01}", 64);
  Rank taker(spec, 3, 0);
  auto store = c10::make_intrusive<c10d::HashStore>();
  GroupOptions options;
  options.timeout = std::chrono::milliseconds(20'000);
  std::vector<std::future<absl::StatusOr<TrainingCursor>>> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.push_back(std::async(std::launch::async, [&, rank]() -> absl::StatusOr<TrainingCursor> {
      GroupPtr group = MakeGlooGroup(store, rank, 2, options);
      if (rank == 0) {
        ShutdownGroup(*group);  // lost: its group goes without sending
        return absl::UnknownError("the sender");
      }
      StateTransferStats stats;
      absl::StatusOr<TrainingCursor> got = ReceiveTrainingState(*group, 0, taker.Refs(), &stats);
      ShutdownGroup(*group);
      return got;
    }));
  }
  EXPECT_EQ(threads[0].get().status().message(), "the sender");
  const absl::StatusOr<TrainingCursor> got = threads[1].get();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  EXPECT_NE(got.status().message().find("receiving the training state from rank 0"),
            std::string::npos)
      << got.status();
}

// The header and the first two model tensors arrive, then the sender is
// lost: the taker's model and optimizer are as they were (it may be the
// furthest survivor at the regroup's next try, so half a state would be
// trained on as if it were whole).
TEST_F(StateTransferTest, ASenderLostHalfwayLeavesTheTakersStateAsItWas) {
  const v1::JobSpec spec = Spec("{type: adamw, lr: 0.01}", 64);
  Rank source(spec, 2, 3);
  Rank taker(spec, 1, 2);  // a survivor one step behind
  const std::vector<torch::Tensor> own = taker.ModelTensors();
  const std::vector<ParamOptimizerState> own_optimizer =
      ExportOptimizerState(*taker.optimizer, taker.params);
  auto store = c10::make_intrusive<c10d::HashStore>();
  GroupOptions options;
  options.timeout = std::chrono::milliseconds(20'000);
  auto sender = std::async(std::launch::async, [&] {
    GroupPtr group = MakeGlooGroup(store, 0, 2, options);
    SendsThenStops lost_halfway(group, /*sends=*/4, /*lost=*/true);  // length, header, 2 tensors
    StateTransferStats stats;
    absl::Status sent = SendTrainingState(lost_halfway, {1}, source.Refs(), {}, &stats);
    ShutdownGroup(*group);  // its sockets close with the process
    return sent;
  });
  GroupPtr group = MakeGlooGroup(store, 1, 2, options);
  StateTransferStats stats;
  const absl::StatusOr<TrainingCursor> got =
      ReceiveTrainingState(*group, 0, taker.Refs(), &stats);
  const absl::Status sent = sender.get();
  EXPECT_EQ(sent.code(), absl::StatusCode::kUnavailable) << sent;
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  ExpectSameModel(taker.ModelTensors(), own);
  ExpectSameOptimizerState(ExportOptimizerState(*taker.optimizer, taker.params), own_optimizer);
  ShutdownGroup(*group);
}

// The sender is cut off after the first two model tensors: neither side
// hears of it from the group. Once the coordinator says so (the abandon
// check), both calls end UNAVAILABLE, long before the group's timeout, and
// the taker's state is as it was.
TEST_F(StateTransferTest, ATransferCutOffHalfwayEndsWhenAbandonedAndChangesNothing) {
  const v1::JobSpec spec = Spec("{type: adamw, lr: 0.01}", 64);
  Rank source(spec, 2, 3);
  Rank taker(spec, 3, 0);  // a replacement
  const std::vector<torch::Tensor> own = taker.ModelTensors();
  auto store = c10::make_intrusive<c10d::HashStore>();
  GroupOptions options;
  options.timeout = std::chrono::milliseconds(600'000);  // far beyond the test's
  std::vector<GroupPtr> groups(2);
  auto sender = std::async(std::launch::async, [&] {
    groups[0] = MakeGlooGroup(store, 0, 2, options);
    SendsThenStops cut_off(groups[0], /*sends=*/4, /*lost=*/false);
    StateTransferStats stats;
    return SendTrainingState(cut_off, {1}, source.Refs(), {}, &stats);
  });
  auto receiver = std::async(std::launch::async, [&] {
    groups[1] = MakeGlooGroup(store, 1, 2, options);
    StateTransferStats stats;
    return ReceiveTrainingState(*groups[1], 0, taker.Refs(), &stats);
  });
  // Both wait on the transfer until the coordinator gives the group up.
  EXPECT_EQ(receiver.wait_for(std::chrono::milliseconds(500)), std::future_status::timeout);
  abandoned_.store(true);
  ASSERT_EQ(receiver.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  ASSERT_EQ(sender.wait_for(std::chrono::seconds(60)), std::future_status::ready);
  const absl::StatusOr<TrainingCursor> got = receiver.get();
  const absl::Status sent = sender.get();
  EXPECT_EQ(got.status().code(), absl::StatusCode::kUnavailable) << got.status();
  EXPECT_NE(got.status().message().find("the coordinator recovered"), std::string::npos)
      << got.status();
  EXPECT_EQ(sent.code(), absl::StatusCode::kUnavailable) << sent;
  EXPECT_NE(sent.message().find("the coordinator recovered"), std::string::npos) << sent;
  ExpectSameModel(taker.ModelTensors(), own);
  // As a rank does with an abandoned group: kept, not closed.
  for (GroupPtr& g : groups) KeepAbandonedGroup(std::move(g));
}

}  // namespace
}  // namespace trainctl::train
