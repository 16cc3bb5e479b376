#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/torch.h>

#include <functional>
#include <vector>

#include "absl/status/statusor.h"
#include "trainctl/v1/jobs.pb.h"
#include "trainctl/v1/spec.pb.h"

namespace trainctl::train {

// Where one rank of a job runs and how it reaches its peers.
struct RankContext {
  int rank = 0;
  int world_size = 1;
  // Null when world_size is 1: a single rank needs no collectives.
  c10::intrusive_ptr<c10d::ProcessGroup> group;
  torch::Device device = torch::kCPU;
  // Receives metric points (rank 0 reports the job-wide ones).
  std::function<void(const v1::MetricPoint&)> report;
};

struct TrainResult {
  int64_t steps = 0;
  double final_train_loss = 0;   // global mean loss of the last step
  double eval_accuracy = -1;     // last evaluation; -1 when there is none
  double eval_loss = -1;
  std::vector<torch::Tensor> parameters;  // final, on the CPU
};

// Runs the data-parallel training loop of `spec` as one rank:
//   * every rank seeds torch with spec.seed and rank 0 broadcasts its initial
//     parameters, so all replicas start identical;
//   * step s of epoch e trains on this rank's slice of the (seed, e)
//     permutation (common/shard_plan.h);
//   * gradients are summed over ranks in one flat buffer (the step's loss
//     rides in its last element) and divided by the world size, so the update
//     equals one rank training on the whole global batch;
//   * evaluation at each epoch end is sharded without padding and reduced
//     exactly (sums of loss and correct predictions, and the count).
// LibTorch and c10d exceptions are caught and returned as a Status.
absl::StatusOr<TrainResult> Train(const v1::JobSpec& spec,
                                  const RankContext& ctx);

}  // namespace trainctl::train
