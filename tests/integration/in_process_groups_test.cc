// Several collective groups in one process, as the loop tests run a job's
// ranks: each round makes new groups whose first collectives start at
// nearly the same moment (a group's constructor returns once every pair is
// connected). Built without ranks_in_one_process.cc against LibTorch
// 2.11, it crashed in the flight recorder in 4 of 5 runs of 500 rounds;
// with it, none did.

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <future>
#include <vector>

#include "worker/train/collective_group.h"

namespace trainctl::train {
namespace {

TEST(InProcessGroupsTest, NewGroupsMayStartTheirFirstCollectiveTogether) {
  constexpr int kRounds = 500;
  constexpr int kWorld = 3;
  for (int round = 0; round < kRounds; ++round) {
    auto store = c10::make_intrusive<c10d::HashStore>();
    std::vector<std::future<double>> sums;
    for (int rank = 0; rank < kWorld; ++rank) {
      sums.push_back(std::async(std::launch::async, [store, rank, round] {
        GroupPtr group = MakeGlooGroup(store, rank, kWorld, {});
        std::vector<torch::Tensor> input{torch::full({2}, double(rank + round),
                                                     torch::kFloat64)};
        std::vector<std::vector<torch::Tensor>> output(1);
        for (int r = 0; r < kWorld; ++r) output[0].push_back(torch::empty_like(input[0]));
        group->allgather(output, input)->wait();
        double sum = 0;
        for (const torch::Tensor& t : output[0]) sum += t[1].item<double>();
        return sum;
      }));
    }
    // 0 + 1 + 2, plus the round once from each rank.
    const double expected = kWorld * (kWorld - 1) / 2.0 + kWorld * round;
    for (int rank = 0; rank < kWorld; ++rank) {
      ASSERT_EQ(sums[rank].get(), expected) << "round " << round << ", rank " << rank;
    }
  }
}

}  // namespace
}  // namespace trainctl::train
