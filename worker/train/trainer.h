#pragma once

#include <torch/torch.h>

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "trainctl/v1/spec.pb.h"
#include "worker/train/rank_context.h"

namespace trainctl::train {

struct TrainResult {
  int64_t steps = 0;
  double final_train_loss = 0;   // global mean loss of the last step
  std::map<std::string, double> eval;     // last evaluation; empty if none
  std::vector<torch::Tensor> parameters;  // final, on the CPU
  int64_t skipped_steps = 0;     // fp16 steps skipped for inf/nan gradients
  int64_t first_step = 0;        // where it resumed (0 = from scratch)
  int64_t checkpoints = 0;       // written by this rank
  // It stopped before the end, on request, after checkpointing `steps`
  // (rank 0: unless stop_checkpoint_error says why that write failed).
  bool stopped = false;
  std::string stop_checkpoint_error;
  // What this rank contributed to the cross-rank values of the last train
  // metric: its own loss, step_ms, samples_per_sec and phase times.
  std::map<std::string, double> logged;
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
//     without padding and reduced exactly;
//   * with ctx.resume_path it continues from that checkpoint's step, and with
//     spec.checkpoint.dir rank 0 writes checkpoints (checkpointer.h);
//   * at each log step every rank contributes its own loss and timings to
//     one all-gather, and rank 0 reports their mean, min and max; with
//     spec.tensorboard.dir rank 0 also writes the train and eval metrics to
//     a TensorBoard event file (tensorboard_writer.h).
// LibTorch and c10d exceptions are caught and returned as a Status.
absl::StatusOr<TrainResult> Train(const v1::JobSpec& spec,
                                  const RankContext& ctx);

}  // namespace trainctl::train
