#include "coordinator/scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace trainctl::coordinator {

namespace {

// The world size for `job` from `available` slots: the most up to its ranks,
// at least its minimum, that divides its batch; 0 when none does.
int WorldFor(const PendingJob& job, int available) {
  const int fewest = job.min_ranks > 0 ? job.min_ranks : job.ranks;
  for (int n = std::min(job.ranks, available); n >= fewest; --n) {
    if (job.batch == 0 || job.batch % n == 0) return n;
  }
  return 0;
}

std::string Needs(const PendingJob& job, const char* what) {
  const int fewest = job.min_ranks > 0 ? job.min_ranks : job.ranks;
  return fewest == job.ranks
             ? absl::StrCat("needs ", job.ranks, " ", what)
             : absl::StrCat("needs ", fewest, " to ", job.ranks, " ", what,
                            " (a count that divides the batch of ", job.batch,
                            ")");
}

// Packs `world` ranks onto the workers with the most free slots of the kind
// the job takes (GPU slots for a GPU job), ties by name. A CPU job fills a
// worker's slots without a GPU before those with one.
Placement Place(const std::string& id, int world, bool gpu,
                std::vector<WorkerSlots>& free) {
  const auto room = [gpu](const WorkerSlots& w) {
    return gpu ? w.free_gpu_slots : w.free_slots;
  };
  std::sort(free.begin(), free.end(), [&](const WorkerSlots& a, const WorkerSlots& b) {
    if (room(a) != room(b)) return room(a) > room(b);
    return a.name < b.name;
  });
  Placement placement{id, {}, {}, gpu};
  for (auto& w : free) {
    while (room(w) > 0 && static_cast<int>(placement.rank_workers.size()) < world) {
      const bool gpu_slot = gpu || w.free_slots <= w.free_gpu_slots;
      placement.rank_workers.push_back(w.name);
      placement.on_gpu_slot.push_back(gpu_slot);
      if (gpu_slot) --w.free_gpu_slots;
      --w.free_slots;
    }
  }
  return placement;
}

}  // namespace

ScheduleResult Schedule(const std::vector<PendingJob>& fifo,
                        const std::vector<WorkerSlots>& workers) {
  ScheduleResult result;
  std::vector<WorkerSlots> free = workers;
  int total = 0;
  int total_gpu = 0;
  for (const auto& w : free) {
    total += w.total_slots;
    total_gpu += w.total_gpu_slots;
  }

  std::string blocked_by;
  for (const PendingJob& job : fifo) {
    if (!blocked_by.empty()) {
      result.waiting[job.id] =
          absl::StrCat("waiting behind job ", blocked_by, " (queued earlier)");
      continue;
    }
    if (!job.not_ready.empty()) {
      result.waiting[job.id] = job.not_ready;
      blocked_by = job.id;
      continue;
    }
    int available = 0;
    int available_gpu = 0;
    for (const auto& w : free) {
      available += w.free_slots;
      available_gpu += w.free_gpu_slots;
    }
    const int gpu_world = job.device == "cpu" ? 0 : WorldFor(job, available_gpu);
    if (gpu_world > 0) {
      result.placements.push_back(Place(job.id, gpu_world, /*gpu=*/true, free));
      continue;
    }
    const int cpu_world = job.device == "cuda" ? 0 : WorldFor(job, available);
    if (cpu_world > 0) {
      result.placements.push_back(Place(job.id, cpu_world, /*gpu=*/false, free));
      continue;
    }
    if (free.empty()) {
      result.waiting[job.id] =
          absl::StrCat(Needs(job, job.device == "cuda" ? "GPU slots" : "slots"),
                       "; no workers registered");
    } else if (job.device == "cuda") {
      result.waiting[job.id] = absl::StrCat(
          Needs(job, "GPU slots"), "; ", available_gpu, " of ", total_gpu,
          " registered GPU slots free",
          total_gpu == 0 ? " (start workers with --gpus on GPU nodes)" : "");
    } else {
      result.waiting[job.id] = absl::StrCat(Needs(job, "slots"), "; ", available,
                                            " of ", total, " registered slots free");
    }
    blocked_by = job.id;
  }
  return result;
}

std::string DescribePlacement(const std::vector<std::string>& rank_workers) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < rank_workers.size()) {
    size_t j = i;
    while (j + 1 < rank_workers.size() && rank_workers[j + 1] == rank_workers[i]) {
      ++j;
    }
    parts.push_back(i == j ? absl::StrCat(i, " on ", rank_workers[i])
                           : absl::StrCat(i, "-", j, " on ", rank_workers[i]));
    i = j + 1;
  }
  return absl::StrCat("ranks ", absl::StrJoin(parts, ", "));
}

}  // namespace trainctl::coordinator
