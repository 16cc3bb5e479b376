#pragma once

// What one caller may see of the cluster, defined once for both front ends
// (the gRPC Jobs service and the HTTP routes): a person sees their own jobs,
// an admin everyone's; every worker is visible, but which ranks run where
// only for the caller's own jobs.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "coordinator/auth/caller.h"
#include "coordinator/job_manager.h"
#include "trainctl/v1/jobs.pb.h"

namespace trainctl::coordinator {

class CallerView {
 public:
  // Both must outlive the view (it is made per call).
  CallerView(const JobManager& jobs, const auth::Caller& caller)
      : jobs_(jobs), caller_(caller) {}

  // The caller's jobs in `states` (all states when empty), oldest first.
  std::vector<v1::Job> Jobs(const std::vector<v1::JobState>& states = {}) const;
  // One page of them (JobManager::ListPage); INVALID_ARGUMENT for a
  // `page_token` that is not a job id.
  absl::StatusOr<JobManager::Page> JobsPage(
      const std::vector<v1::JobState>& states, const std::string& page_token,
      size_t max_jobs, size_t max_bytes) const;
  // One page of accounting (GetHistory): the caller's jobs, or `owner`'s
  // (PERMISSION_DENIED naming them unless that is the caller or the caller
  // is an admin), that existed in the request's window, as of `now_ms`.
  absl::StatusOr<v1::GetHistoryResponse> History(
      const v1::GetHistoryRequest& request, int64_t now_ms) const;
  // NOT_FOUND for an unknown id; PERMISSION_DENIED naming the owner and
  // `action` ("read", "cancel", ...) for another user's job.
  absl::StatusOr<v1::Job> Job(const std::string& job_id,
                              const char* action) const;
  // Every worker, its `running` ranks ("job/rank") cut to the caller's jobs.
  std::vector<v1::WorkerInfo> Workers() const;

 private:
  const JobManager& jobs_;
  const auth::Caller& caller_;
};

}  // namespace trainctl::coordinator
