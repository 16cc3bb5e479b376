#include "coordinator/caller_view.h"

#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace trainctl::coordinator {

std::vector<v1::Job> CallerView::Jobs(
    const std::vector<v1::JobState>& states) const {
  if (caller_.IsAdmin()) return jobs_.List(states);
  if (!caller_.IsPerson()) return {};
  return jobs_.List(states, &caller_.name);  // copies only theirs
}

absl::StatusOr<JobManager::Page> CallerView::JobsPage(
    const std::vector<v1::JobState>& states, const std::string& page_token,
    size_t max_jobs, size_t max_bytes) const {
  absl::string_view digits = page_token;
  int64_t number = 0;
  if (!page_token.empty() && (!absl::ConsumePrefix(&digits, "job-") ||
                              !absl::SimpleAtoi(digits, &number) || number < 1)) {
    return absl::InvalidArgumentError(
        "page_token: not a job id (pass the next_page_token of the last page)");
  }
  if (!caller_.IsPerson()) return JobManager::Page{};
  return jobs_.ListPage(states, caller_.IsAdmin() ? nullptr : &caller_.name,
                        page_token, max_jobs, max_bytes);
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
