#include "coordinator/caller_view.h"

#include <set>

#include "absl/strings/str_cat.h"

namespace trainctl::coordinator {

std::vector<v1::Job> CallerView::Jobs(
    const std::vector<v1::JobState>& states) const {
  if (caller_.IsAdmin()) return jobs_.List(states);
  if (!caller_.IsPerson()) return {};
  return jobs_.List(states, &caller_.name);  // copies only theirs
}

absl::StatusOr<v1::Job> CallerView::Job(const std::string& job_id,
                                        const char* action) const {
  absl::StatusOr<v1::Job> job = jobs_.Get(job_id);
  if (!job.ok()) return job.status();
  if (!caller_.MayTouchJobOf(job->owner())) {
    return absl::PermissionDeniedError(absl::StrCat(
        "job ", job_id, " belongs to ", job->owner(), "; only ", job->owner(),
        " or an admin may ", action, " it"));
  }
  return job;
}

std::vector<v1::WorkerInfo> CallerView::Workers() const {
  std::vector<v1::WorkerInfo> workers = jobs_.Workers();
  if (caller_.IsAdmin()) return workers;
  std::set<std::string> own;
  for (const v1::Job& job : Jobs()) own.insert(job.id());
  for (v1::WorkerInfo& worker : workers) {
    std::vector<std::string> kept;
    for (const std::string& rank : worker.running()) {
      if (own.count(rank.substr(0, rank.find('/'))) > 0) kept.push_back(rank);
    }
    worker.clear_running();
    for (std::string& rank : kept) worker.add_running(std::move(rank));
  }
  return workers;
}

}  // namespace trainctl::coordinator
