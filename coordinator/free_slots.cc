#include "coordinator/free_slots.h"

#include <algorithm>
#include <map>

namespace trainctl::coordinator {

FreeSlots::FreeSlots(const std::vector<WorkerSlots>& workers)
    : workers_(workers) {
  std::sort(workers_.begin(), workers_.end(),
            [](const WorkerSlots& a, const WorkerSlots& b) { return a.name < b.name; });
  for (int i = 0; i < static_cast<int>(workers_.size()); ++i) {
    const WorkerSlots& w = workers_[i];
    free_ += w.free_slots;
    free_gpu_ += w.free_gpu_slots;
    total_ += w.total_slots;
    total_gpu_ += w.total_gpu_slots;
    if (w.free_slots > 0) by_free_.insert({-w.free_slots, i});
    if (w.free_gpu_slots > 0) by_free_gpu_.insert({-w.free_gpu_slots, i});
  }
}

Placement FreeSlots::Plan(const std::string& job_id, int world, bool gpu) const {
  Placement placement;
  placement.job_id = job_id;
  placement.gpu = gpu;
  const Order& order = gpu ? by_free_gpu_ : by_free_;
  for (auto it = order.begin();
       it != order.end() && static_cast<int>(placement.rank_workers.size()) < world;
       ++it) {
    const WorkerSlots& w = workers_[it->second];
    int free = w.free_slots;
    int free_gpu = w.free_gpu_slots;
    while ((gpu ? free_gpu : free) > 0 &&
           static_cast<int>(placement.rank_workers.size()) < world) {
      const bool gpu_slot = gpu || free <= free_gpu;
      placement.rank_workers.push_back(w.name);
      placement.on_gpu_slot.push_back(gpu_slot);
      if (gpu_slot) --free_gpu;
      --free;
    }
  }
  return placement;
}

Placement FreeSlots::PlanSpares(const std::string& job_id, int count,
                                const std::set<std::string>& avoid) const {
  Placement placement;
  placement.job_id = job_id;
  std::vector<int> used(workers_.size(), 0), used_gpu(workers_.size(), 0);
  // One slot per worker in turn over the others, then over `avoid`.
  for (bool avoided : {false, true}) {
    std::vector<int> order;
    for (const auto& [minus_free, i] : by_free_) {
      if ((avoid.count(workers_[i].name) != 0) == avoided) order.push_back(i);
    }
    for (bool took = true; took;) {
      took = false;
      for (int i : order) {
        if (static_cast<int>(placement.rank_workers.size()) >= count) return placement;
        const WorkerSlots& w = workers_[i];
        if (used[i] >= w.free_slots) continue;
        // Slots without a GPU first, as Plan does for a CPU job.
        const bool gpu_slot = w.free_slots - used[i] <= w.free_gpu_slots - used_gpu[i];
        placement.on_gpu_slot.push_back(gpu_slot);
        placement.rank_workers.push_back(w.name);
        ++used[i];
        if (gpu_slot) ++used_gpu[i];
        took = true;
      }
    }
  }
  return placement;
}

void FreeSlots::Take(const Placement& placement) {
  std::map<int, std::pair<int, int>> taken;  // worker -> (slots, gpu slots)
  for (size_t r = 0; r < placement.rank_workers.size(); ++r) {
    const auto it = std::lower_bound(
        workers_.begin(), workers_.end(), placement.rank_workers[r],
        [](const WorkerSlots& w, const std::string& name) { return w.name < name; });
    const int i = static_cast<int>(it - workers_.begin());
    ++taken[i].first;
    if (placement.on_gpu_slot[r]) ++taken[i].second;
  }
  for (const auto& [i, counts] : taken) {
    WorkerSlots& w = workers_[i];
    const int old_free = w.free_slots;
    const int old_free_gpu = w.free_gpu_slots;
    w.free_slots -= counts.first;
    w.free_gpu_slots -= counts.second;
    free_ -= counts.first;
    free_gpu_ -= counts.second;
    Reindex(i, old_free, old_free_gpu);
  }
}

void FreeSlots::Reindex(int i, int old_free, int old_free_gpu) {
  const WorkerSlots& w = workers_[i];
  by_free_.erase({-old_free, i});
  by_free_gpu_.erase({-old_free_gpu, i});
  if (w.free_slots > 0) by_free_.insert({-w.free_slots, i});
  if (w.free_gpu_slots > 0) by_free_gpu_.insert({-w.free_gpu_slots, i});
}

}  // namespace trainctl::coordinator
