#include "coordinator/scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace trainctl::coordinator {

ScheduleResult Schedule(const std::vector<PendingJob>& fifo,
                        const std::vector<WorkerSlots>& workers) {
  ScheduleResult result;
  std::vector<WorkerSlots> free = workers;
  int total = 0;
  for (const auto& w : free) total += w.total_slots;

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
    for (const auto& w : free) available += w.free_slots;
    const int fewest = job.min_ranks > 0 ? job.min_ranks : job.ranks;
    int world = 0;
    for (int n = std::min(job.ranks, available); n >= fewest && world == 0; --n) {
      if (job.batch == 0 || job.batch % n == 0) world = n;
    }
    if (world == 0) {
      const std::string needs =
          fewest == job.ranks
              ? absl::StrCat("needs ", job.ranks, " slots")
              : absl::StrCat("needs ", fewest, " to ", job.ranks,
                             " slots (a count that divides the batch of ",
                             job.batch, ")");
      if (free.empty()) {
        result.waiting[job.id] = absl::StrCat(needs, "; no workers registered");
      } else {
        result.waiting[job.id] =
            absl::StrCat(needs, "; ", available, " of ", total,
                         " registered slots free");
      }
      blocked_by = job.id;
      continue;
    }
    std::sort(free.begin(), free.end(),
              [](const WorkerSlots& a, const WorkerSlots& b) {
                if (a.free_slots != b.free_slots) {
                  return a.free_slots > b.free_slots;
                }
                return a.name < b.name;
              });
    Placement placement{job.id, {}};
    for (auto& w : free) {
      while (w.free_slots > 0 &&
             static_cast<int>(placement.rank_workers.size()) < world) {
        placement.rank_workers.push_back(w.name);
        --w.free_slots;
      }
    }
    result.placements.push_back(std::move(placement));
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
