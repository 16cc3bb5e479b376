#include "coordinator/scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

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
    int available = 0;
    for (const auto& w : free) available += w.free_slots;
    if (available < job.ranks) {
      if (free.empty()) {
        result.waiting[job.id] = absl::StrCat("needs ", job.ranks,
                                              " slots; no workers registered");
      } else {
        result.waiting[job.id] =
            absl::StrCat("needs ", job.ranks, " slots; ", available, " of ",
                         total, " registered slots free");
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
             static_cast<int>(placement.rank_workers.size()) < job.ranks) {
        placement.rank_workers.push_back(w.name);
        --w.free_slots;
      }
    }
    result.placements.push_back(std::move(placement));
  }
  return result;
}

}  // namespace trainctl::coordinator
