#pragma once

#include <map>
#include <string>
#include <vector>

namespace trainctl::coordinator {

// Gang scheduling as a pure function of the queue and the free slots.
//
// Jobs are served strictly first in, first out: when the oldest job does not
// fit, younger jobs wait behind it, so a large job is never starved by a
// stream of small ones. A job starts only when all of its ranks fit at once.
// Ranks are packed onto the workers with the most free slots first (ties by
// name), so ranks of a job share as few nodes as possible and the ranks on
// one node are consecutive. A job restarting after a failure may take fewer
// ranks (down to min_ranks): the most that fit and divide its global batch.
//
// GPUs: some slots of a worker have a GPU of their own. A job on `cuda`
// runs only on such slots; one on `auto` takes them when all its ranks fit
// on free ones, else ordinary slots (its ranks then see no GPU); a job on
// `cpu` takes slots without a GPU first. All ranks of a job are of one kind
// (NCCL and Gloo ranks cannot form one group).

struct PendingJob {
  std::string id;
  int ranks = 0;          // the world size wanted, and the most it takes
  int min_ranks = 0;      // the fewest it may start with (0: exactly `ranks`)
  int64_t batch = 0;      // the world size must divide it (0: any size)
  std::string not_ready;  // set: it cannot start yet, and why; blocks the rest
  std::string device = "cpu";  // training.device: cpu, auto or cuda
};

struct WorkerSlots {
  std::string name;
  int free_slots = 0;
  int total_slots = 0;
  // Of those, the slots with a GPU (free_gpu_slots <= free_slots).
  int free_gpu_slots = 0;
  int total_gpu_slots = 0;
};

struct Placement {
  std::string job_id;
  std::vector<std::string> rank_workers;  // rank i runs on rank_workers[i]
  // Whether rank i takes one of its worker's GPU slots, and whether the
  // ranks use the GPU of theirs (a cpu job may fill GPU slots last).
  std::vector<bool> on_gpu_slot;
  bool gpu = false;
};

struct ScheduleResult {
  std::vector<Placement> placements;
  // For each job left waiting: why, in words a person can act on.
  std::map<std::string, std::string> waiting;
};

ScheduleResult Schedule(const std::vector<PendingJob>& fifo,
                        const std::vector<WorkerSlots>& workers);

// A placement in words: "ranks 0-1 on node-a, 2 on node-b".
std::string DescribePlacement(const std::vector<std::string>& rank_workers);

}  // namespace trainctl::coordinator
