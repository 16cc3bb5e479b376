// Data parallelism is proven, not assumed: 2 ranks with per-rank batch 32
// must end with the same parameters as 1 rank with batch 64, trained by the
// same loop the rank process runs, on a slice of Fashion-MNIST.

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <future>

#include "common/spec.h"
#include "worker/train/trainer.h"

namespace trainctl::train {
namespace {

constexpr char kData[] = "/usr/share/datasets/fashion-mnist/";

// Adam-family updates divide by sqrt(v): a gradient that is nearly zero by
// cancellation has large relative float noise, which the division turns into
// an update difference of up to ~lr. At lr 1e-3 the max element difference
// stays ~3e-6 (at lr 1e-2 it reaches ~4e-5 while the norm-relative difference
// is 6e-7), so AdamW is checked at its default learning rate.
std::string LearningRateFor(const std::string& optimizer) {
  return optimizer == "sgd" ? "0.05" : "0.001";
}

v1::JobSpec MakeSpec(int ranks, const std::string& optimizer) {
  const std::string lr = LearningRateFor(optimizer);
  std::string text = std::string("ranks: ") + std::to_string(ranks) +
                     "\nseed: 11\nmodel: {type: mlp, hidden: [128, 64]}\n"
                     "data:\n  train_images: " + kData +
                     "train-images-idx3-ubyte.gz\n  train_labels: " + kData +
                     "train-labels-idx1-ubyte.gz\n  train_limit: 1280\n"
                     "optimizer: {type: " + optimizer + ", lr: " + lr + "}\n"
                     "scheduler: {type: linear, warmup_steps: 5}\n"
                     "training: {batch_size: 64, max_steps: 20, epochs: 5}\n";
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(text);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

std::vector<TrainResult> RunRanks(const v1::JobSpec& spec) {
  const int world = spec.ranks();
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::future<TrainResult>> futures;
  for (int rank = 0; rank < world; ++rank) {
    futures.push_back(std::async(std::launch::async, [&, rank] {
      RankContext ctx;
      ctx.rank = rank;
      ctx.world_size = world;
      if (world > 1) {
        auto options = c10d::ProcessGroupGloo::Options::create();
        options->devices.push_back(
            c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
        ctx.group = c10::make_intrusive<c10d::ProcessGroupGloo>(
            store, rank, world, options);
      }
      absl::StatusOr<TrainResult> result = Train(spec, ctx);
      EXPECT_TRUE(result.ok()) << result.status();
      return result.ok() ? *result : TrainResult{};
    }));
  }
  std::vector<TrainResult> results;
  for (auto& f : futures) results.push_back(f.get());
  return results;
}

// max over tensors of max|a - b| / max|b|
double MaxRelativeDifference(const std::vector<torch::Tensor>& a,
                             const std::vector<torch::Tensor>& b) {
  double worst = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double scale = b[i].abs().max().item<double>();
    const double diff = (a[i] - b[i]).abs().max().item<double>();
    worst = std::max(worst, diff / std::max(scale, 1e-12));
  }
  return worst;
}

class DataParallelEquivalenceTest
    : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { at::set_num_threads(1); }
};

TEST_P(DataParallelEquivalenceTest, TwoRanksOfHalfBatchEqualOneRankOfFull) {
  std::vector<TrainResult> one = RunRanks(MakeSpec(1, GetParam()));
  std::vector<TrainResult> two = RunRanks(MakeSpec(2, GetParam()));
  ASSERT_EQ(one.size(), 1u);
  ASSERT_EQ(two.size(), 2u);
  ASSERT_EQ(one[0].steps, 20);
  ASSERT_EQ(two[0].steps, 20);
  ASSERT_FALSE(one[0].parameters.empty());

  // The replicas agree with each other exactly (same reduced gradients)...
  EXPECT_EQ(MaxRelativeDifference(two[0].parameters, two[1].parameters), 0.0);
  // ...and with the single rank up to float summation order.
  const double diff =
      MaxRelativeDifference(two[0].parameters, one[0].parameters);
  RecordProperty("max_relative_difference", std::to_string(diff));
  std::cout << GetParam() << ": max relative parameter difference " << diff
            << std::endl;
  EXPECT_LE(diff, 1e-5);
  // The parameters did move: the test would catch a loop that never steps.
  std::vector<TrainResult> untrained =
      RunRanks([&] {
        v1::JobSpec s = MakeSpec(1, GetParam());
        s.mutable_training()->set_max_steps(1);
        return s;
      }());
  EXPECT_GT(MaxRelativeDifference(untrained[0].parameters, one[0].parameters),
            1e-3);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, DataParallelEquivalenceTest,
                         ::testing::Values("adamw", "adam", "sgd"));

}  // namespace
}  // namespace trainctl::train
