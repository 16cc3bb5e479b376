#include "coordinator/job_state.h"

#include "absl/strings/str_cat.h"
#include "common/names.h"

namespace trainctl::coordinator {

bool IsFinal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

absl::Status CheckTransition(v1::JobState from, v1::JobState to) {
  bool allowed = false;
  switch (from) {
    case v1::JOB_STATE_QUEUED:
      allowed = to == v1::JOB_STATE_RUNNING || to == v1::JOB_STATE_CANCELLED ||
                to == v1::JOB_STATE_FAILED;
      break;
    case v1::JOB_STATE_RUNNING:
      // RUNNING again: a new generation recovered in place.
      allowed = IsFinal(to) || to == v1::JOB_STATE_RESTARTING ||
                to == v1::JOB_STATE_PREEMPTED || to == v1::JOB_STATE_RUNNING;
      break;
    case v1::JOB_STATE_PREEMPTED:
      // SUCCEEDED: every rank finished its last step before the request to
      // stop reached it.
      allowed = to == v1::JOB_STATE_RUNNING || IsFinal(to);
      break;
    case v1::JOB_STATE_RESTARTING:
      allowed = to == v1::JOB_STATE_RUNNING || to == v1::JOB_STATE_CANCELLED ||
                to == v1::JOB_STATE_FAILED;
      break;
    default:
      allowed = false;
  }
  if (allowed) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "job cannot go from ", StateName(from), " to ", StateName(to)));
}

std::string StateName(v1::JobState state) { return JobStateName(state); }

}  // namespace trainctl::coordinator
