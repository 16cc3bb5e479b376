// JobManager's retention: finished jobs are deleted by count and age, or
// one by one by their owner, so that the coordinator's memory, its SQLite
// file and the time Recover() takes stay bounded (security review H4).

#include <algorithm>
#include <deque>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "coordinator/job_manager.h"
#include "coordinator/job_state.h"

namespace trainctl::coordinator {
namespace {

// Deletions per CheckLeases tick: each is a durable write.
constexpr int kMaxRetiredPerTick = 64;

}  // namespace

void JobManager::SetRetention(const Retention& retention) {
  std::lock_guard<std::mutex> lock(mu_);
  retention_ = retention;
}

absl::Status JobManager::Delete(const std::string& job_id) {
  absl::StatusOr<StoreWriter::Ticket> deleted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    deleted = DeleteLocked(job_id);
  }
  if (!deleted.ok()) return deleted.status();
  if (absl::Status s = writer_.Drain(*deleted); !s.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "job ", job_id, " is forgotten, but its record could not be removed "
        "from the state database yet (retried with the next change): ",
        s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<StoreWriter::Ticket> JobManager::DeleteLocked(
    const std::string& job_id) {
  v1::Job* job = FindLocked(job_id);
  if (job == nullptr) {
    return absl::NotFoundError(absl::StrCat("no job with id '", job_id, "'"));
  }
  if (!IsFinal(job->state())) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " is ", StateName(job->state()),
                     "; cancel it before deleting it"));
  }
  // Pending writes first, so that none can bring the job back after it.
  StoreWriter::Ticket ticket = SaveLocked();
  ticket.Add(writer_.EnqueueDelete(job_id));
  jobs_.erase(job_id);
  order_.erase(std::find(order_.begin(), order_.end(), job_id));
  dirty_.erase(job_id);
  uncheckpointed_.erase(job_id);
  budgets_.erase(job_id);
  events_.Forget(job_id);
  return ticket;
}

StoreWriter::Ticket JobManager::RetireFinishedLocked() {
  const int64_t now = clock_.NowUnixMs();
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
    auto most = std::max_element(
        kept_by_owner.begin(), kept_by_owner.end(),
        [](const auto& a, const auto& b) {
          return a.second.size() < b.second.size();
        });
    retire.push_back(most->second.front());
    most->second.pop_front();
    --kept;
  }
  StoreWriter::Ticket deletions;
  for (const std::string& id : retire) {
    // Final and present: DeleteLocked cannot refuse. A failed write is
    // retried by the StoreWriter.
    if (absl::StatusOr<StoreWriter::Ticket> t = DeleteLocked(id); t.ok()) {
      deletions.Add(*std::move(t));
    }
    TLOG_INFO << "deleted finished job " << id << " (retention)";
  }
  return deletions;
}

}  // namespace trainctl::coordinator
