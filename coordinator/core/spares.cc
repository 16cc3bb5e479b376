// fault_tolerance.spares: free slots held for a running job's replacement
// ranks. The scheduling pass decides which slots each job holds
// (scheduler.h, "Spares"); here the JobCore keeps its answer, shows it
// on the job, and keeps other jobs' replacements and elastic growth off
// slots held for someone else.

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/core/job_core.h"

namespace trainctl::coordinator {
namespace {

// One slot fewer on `worker` (its GPU slots never above its slots).
void TakeOne(std::vector<WorkerSlots>& slots, const std::string& worker) {
  for (WorkerSlots& w : slots) {
    if (w.name != worker || w.free_slots == 0) continue;
    --w.free_slots;
    w.free_gpu_slots = std::min(w.free_gpu_slots, w.free_slots);
    return;
  }
}

}  // namespace

int JobCore::SparesWanted(const v1::Job& job) const {
  const v1::FaultToleranceSpec& ft = job.spec().fault_tolerance();
  // On CUDA in-place recovery falls back to the restart: nothing to hold.
  if (!ft.in_place() || job.spec().training().device() == "cuda") return 0;
  for (const v1::RankInfo& rank : job.ranks()) {
    if (rank.gpu()) return 0;
  }
  return ft.spares();
}

std::vector<WorkerSlots> JobCore::SlotsLeftFor(const v1::Job& job,
                                               bool own_too) const {
  std::vector<WorkerSlots> slots = registry_.FreeSlots();
  const int priority = scheduling_.ValueOf(job.spec().priority());
  for (const auto& [id, workers] : held_spares_) {
    if (id == job.id() && !own_too) continue;
    auto other = jobs_.find(id);
    if (other == jobs_.end() ||
        scheduling_.ValueOf(other->second.spec().priority()) < priority) {
      continue;  // a job of a lower priority yields its spares
    }
    for (const std::string& worker : workers) TakeOne(slots, worker);
  }
  return slots;
}

void JobCore::RecordSpares(
    const std::map<std::string, std::vector<std::string>>& held) {
  std::set<std::string> ids;
  for (const auto& [id, workers] : held_spares_) ids.insert(id);
  for (const auto& [id, workers] : held) ids.insert(id);
  for (const std::string& id : ids) {
    v1::Job* job = Find(id);
    if (job == nullptr) continue;
    auto it = held.find(id);
    const std::vector<std::string> now =
        it == held.end() ? std::vector<std::string>() : it->second;
    if (std::equal(now.begin(), now.end(), job->spare_workers().begin(),
                   job->spare_workers().end())) {
      continue;
    }
    job->clear_spare_workers();
    for (const std::string& worker : now) job->add_spare_workers(worker);
    MarkDirty(id);
    if (job->state() != v1::JOB_STATE_RUNNING) continue;
    const int wanted = job->spec().fault_tolerance().spares();
    RecordNote(
        *job, 0,
        now.empty()
            ? absl::StrCat(
                  "[trainctl] scheduler: holds no spare slot of the ", wanted,
                  " asked for (none free within its quotas); a lost rank is "
                  "replaced on a free slot if there is one")
            : absl::StrCat("[trainctl] scheduler: holds ", now.size(), " of ",
                           wanted, " spare slot", wanted == 1 ? "" : "s",
                           " for its replacement "
                           "ranks, on ",
                           absl::StrJoin(now, ", ")));
  }
  held_spares_ = held;
}

}  // namespace trainctl::coordinator
