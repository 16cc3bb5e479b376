#pragma once

// The training loop run by several ranks at once as threads of the test,
// joined by Gloo over an in-memory store: how the loop tests prove data
// parallelism, checkpoints and metrics without starting processes.

#include <gtest/gtest.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include <functional>
#include <future>
#include <vector>

#include "worker/train/collective_group.h"
#include "worker/train/trainer.h"

namespace trainctl::train {

// Trains `spec` on spec.ranks() threads. Each builds its RankContext (rank
// and world size set), lets `configure` fill in the rest for its rank (job
// id, callbacks, device; it runs on that rank's thread), joins the group
// and trains. Returns each rank's result, in rank order; a failure is a
// test failure and an empty result.
inline std::vector<TrainResult> TrainRanksAsThreads(
    const v1::JobSpec& spec,
    const std::function<void(int rank, RankContext& ctx)>& configure = {}) {
  const int world = spec.ranks();
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::future<TrainResult>> futures;
  for (int rank = 0; rank < world; ++rank) {
    futures.push_back(std::async(std::launch::async, [&, rank] {
      RankContext ctx;
      ctx.rank = rank;
      ctx.world_size = world;
      if (configure) configure(rank, ctx);
      if (world > 1) ctx.group = MakeGlooGroup(store, rank, world, {});
      absl::StatusOr<TrainResult> result = Train(spec, ctx);
      if (ctx.group) ShutdownGroup(*ctx.group);  // as the rank process does
      EXPECT_TRUE(result.ok()) << result.status();
      return result.ok() ? *result : TrainResult{};
    }));
  }
  std::vector<TrainResult> results;
  for (auto& f : futures) results.push_back(f.get());
  return results;
}

}  // namespace trainctl::train
