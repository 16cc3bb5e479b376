// JobCore's retention: finished jobs are deleted by count and age, or
// one by one by their owner, so that the coordinator's memory, its SQLite
// file and the time Recover() takes stay bounded (security review H4).

#include <algorithm>
#include <deque>
#include <map>

#include "absl/strings/str_cat.h"
#include "coordinator/core/job_core.h"
#include "coordinator/job_state.h"

namespace trainctl::coordinator {
namespace {

// Deletions per CheckLeases tick: each is a durable write.
constexpr int kMaxRetiredPerTick = 64;

}  // namespace

absl::Status JobCore::Delete(const std::string& job_id) {
  v1::Job* job = Find(job_id);
  if (job == nullptr) {
    return absl::NotFoundError(absl::StrCat("no job with id '", job_id, "'"));
  }
  if (!IsFinal(job->state())) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " is ", StateName(job->state()),
                     "; cancel it before deleting it"));
  }
  // Pending writes first, so that none can bring the job back after it.
  Save();
  effects_.changes.push_back(DeleteJobRecords{job_id});
  effects_.changes.push_back(EventsForgotten{job_id});
  jobs_.erase(job_id);
  order_.erase(std::find(order_.begin(), order_.end(), job_id));
  dirty_.erase(job_id);
  catalog_.erase(job_id);
  last_seq_.erase(job_id);
  budgets_.erase(job_id);
  return absl::OkStatus();
}

void JobCore::RetireFinished() {
  const int64_t now = now_;
  std::vector<std::string> retire;
  // Past the count, the owner with the most finished jobs loses their
  // oldest: one user's flood of submissions deletes their own history,
  // not everyone's.
  std::map<std::string, std::deque<std::string>> kept_by_owner;
  int64_t kept = 0;
  for (const std::string& id : order_) {  // oldest first
    const v1::Job& job = jobs_.at(id);
    if (!IsFinal(job.state())) continue;
    const bool too_old = retention_.max_age_ms > 0 &&
                         now - job.finished_unix_ms() > retention_.max_age_ms;
    if (too_old && static_cast<int>(retire.size()) < kMaxRetiredPerTick) {
      retire.push_back(id);
    } else {
      kept_by_owner[job.owner()].push_back(id);
      ++kept;
    }
  }
  while (retention_.max_finished_jobs > 0 &&
         kept > retention_.max_finished_jobs &&
         static_cast<int>(retire.size()) < kMaxRetiredPerTick) {
    auto most = std::max_element(kept_by_owner.begin(), kept_by_owner.end(),
                                 [](const auto& a, const auto& b) {
                                   return a.second.size() < b.second.size();
                                 });
    retire.push_back(most->second.front());
    most->second.pop_front();
    --kept;
  }
  for (const std::string& id : retire) {
    // Final and present: Delete cannot refuse. A failed write is retried
    // by the shell's writer.
    Delete(id).IgnoreError();
    Log(LogLevel::kInfo, absl::StrCat("deleted finished job ", id, " (retention)"));
  }
}

}  // namespace trainctl::coordinator
