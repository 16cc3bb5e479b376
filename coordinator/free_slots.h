#pragma once

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "coordinator/scheduler.h"

namespace trainctl::coordinator {

// The free slots of the cluster during one scheduling pass, indexed so that
// placing a job costs O(workers touched * log workers) rather than a sort
// of every worker: a pass over 10,000 queued jobs and 1,000 workers places
// thousands of jobs.
class FreeSlots {
 public:
  explicit FreeSlots(const std::vector<WorkerSlots>& workers);

  int free() const { return free_; }
  int free_gpu() const { return free_gpu_; }
  int total() const { return total_; }
  int total_gpu() const { return total_gpu_; }
  bool empty() const { return workers_.empty(); }

  // Where `world` ranks would go (GPU slots only when `gpu`), packed onto
  // the workers with the most free slots of that kind, ties by name; a
  // CPU job takes a worker's slots without a GPU before those with one.
  // Needs world <= free() (free_gpu() when gpu). Changes nothing.
  Placement Plan(const std::string& job_id, int world, bool gpu) const;
  // Where `count` spare slots of a CPU job would go (at most free()): one
  // per worker in turn (in Plan's order) over the workers not in `avoid`
  // (those running the job's ranks), then over those. Changes nothing.
  Placement PlanSpares(const std::string& job_id, int count,
                       const std::set<std::string>& avoid) const;
  // Takes the placement's slots.
  void Take(const Placement& placement);

 private:
  // (room, index): largest room first, then the name's order.
  using Order = std::set<std::pair<int, int>>;
  void Reindex(int worker, int old_free, int old_free_gpu);

  std::vector<WorkerSlots> workers_;  // sorted by name
  Order by_free_;              // (-free_slots, index)
  Order by_free_gpu_;          // (-free_gpu_slots, index)
  int free_ = 0, free_gpu_ = 0, total_ = 0, total_gpu_ = 0;
};

}  // namespace trainctl::coordinator
