#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/torch.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainctl/v1/jobs.pb.h"
#include "trainctl/v1/spec.pb.h"
#include "worker/train/data/dataset.h"

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
  // Supplies the datasets when set (the rank process loads them while it
  // joins the process group); otherwise Train loads them itself.
  std::function<absl::StatusOr<Datasets>()> load_data;
  // Start-up timings (ms) to report with the plan metric, e.g. join_ms.
  std::map<std::string, double> startup;
};

struct TrainResult {
  int64_t steps = 0;
  double final_train_loss = 0;   // global mean loss of the last step
  std::map<std::string, double> eval;     // last evaluation; empty if none
  std::vector<torch::Tensor> parameters;  // final, on the CPU
  int64_t skipped_steps = 0;     // fp16 steps skipped for inf/nan gradients
};

// Runs the data-parallel training loop of `spec` as one rank:
//   * every rank seeds torch with spec.seed and rank 0 broadcasts its initial
//     parameters, so all replicas start identical;
//   * an optimizer step is grad_accum_steps micro-batches; micro-batch m of
//     step s in epoch e is this rank's slice of window s*A+m of the (seed, e)
//     permutation (common/shard_plan.h);
//   * gradients are averaged over ranks once per optimizer step, after the
//     last micro-batch (the loss rides in the same collective), so the update
//     equals one rank training on the whole global batch; with
//     local_sgd_steps K, ranks step on local gradients and average their
//     parameters every K steps instead;
//   * clipping uses the global norm after the averaging; bf16 runs forward
//     and backward under autocast with fp32 master weights; fp16 (CUDA) adds
//     a dynamic loss scaler that skips steps with inf/nan gradients;
//   * evaluation every eval_every_steps and at each epoch end is sharded
//     without padding and reduced exactly.
// LibTorch and c10d exceptions are caught and returned as a Status.
absl::StatusOr<TrainResult> Train(const v1::JobSpec& spec,
                                  const RankContext& ctx);

}  // namespace trainctl::train
