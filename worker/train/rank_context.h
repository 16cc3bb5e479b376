#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "trainctl/v1/jobs.pb.h"
#include "worker/train/data/dataset.h"
#include "worker/support/fault_hooks.h"
#include "worker/support/loop_position.h"
#include "worker/train/torch_compat.h"

namespace trainctl::train {

// Where one rank of a job runs, how it reaches its peers, and where its
// reports go.
struct RankContext {
  std::string job_id = "local";
  // Which coordinator's job_id this is (a digest of its CA, or its address
  // when plaintext): tracking tells two clusters' job-3 apart by it.
  std::string cluster = "local";
  int generation = 1;
  int rank = 0;
  int world_size = 1;
  // Null when world_size is 1: a single rank needs no collectives.
  GroupPtr group;
  torch::Device device = torch::kCPU;
  // Receives metric points (rank 0 reports the job-wide ones).
  std::function<void(const v1::MetricPoint&)> report;
  // Rank 0: a checkpoint file is in place (renamed and synced).
  std::function<void(const v1::Checkpoint&)> on_checkpoint;
  // A checkpoint to resume from: rank 0 reads it and shares its bytes.
  std::string resume_path;
  // A replacement rank joining the survivors of an in-place recovery: it
  // takes their state (and the step they are at) over the collective,
  // instead of rank 0's initial parameters or a checkpoint.
  bool joins_in_place = false;
  // Supplies the datasets when set (the rank process loads them while it
  // joins the process group); otherwise Train loads them itself.
  std::function<absl::StatusOr<Datasets>()> load_data;
  // Start-up timings (ms) to report with the plan metric, e.g. join_ms.
  std::map<std::string, double> startup;
  // Written by the loop when set; read by the rank's progress reporter.
  LoopPosition* progress = nullptr;
  FaultHooks faults;
  // Whether someone asked this rank to checkpoint and stop (the agent's
  // SIGUSR1 when the job is preempted); read once a step. Null: never.
  std::function<bool()> stop_requested;

  // In-place recovery (fault_tolerance.in_place, on Gloo): called once the
  // loop has let go of its group after a collective failed, most likely
  // because a peer was lost. Waits for the coordinator to say where this
  // rank goes next and forms that generation's group (null for a world of
  // one). An error (no place for it, the job restarts from its checkpoint)
  // ends the rank. Null: a failed collective ends the rank at once.
  struct NextGeneration {
    int generation = 0;
    int rank = 0;
    int world_size = 1;
    GroupPtr group;
  };
  std::function<absl::StatusOr<NextGeneration>()> regroup;
  // The latest generation the agent asked this rank to join by leaving its
  // group at the end of a step (an elastic job grows in place); due while
  // above `generation`. Read once a step with `regroup` set; null: never.
  std::function<int()> regroup_requested_generation;
};

}  // namespace trainctl::train
