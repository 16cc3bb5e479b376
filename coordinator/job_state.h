#pragma once

#include <string>

#include "absl/status/status.h"
#include "trainctl/v1/jobs.pb.h"

namespace trainctl::coordinator {

// The job state machine, as pure functions:
//   QUEUED -> RUNNING -> SUCCEEDED | FAILED | CANCELLED
//   QUEUED -> CANCELLED | FAILED
//   RUNNING -> RESTARTING -> RUNNING (next generation) | CANCELLED | FAILED
//   RUNNING -> PREEMPTED -> RUNNING (next generation) | any final state
// Final states have no way out.

bool IsFinal(v1::JobState state);

// OK when `from -> to` is an edge of the machine; FAILED_PRECONDITION naming
// both states otherwise.
absl::Status CheckTransition(v1::JobState from, v1::JobState to);

// "QUEUED", "RUNNING", ... (the enum name without its prefix).
std::string StateName(v1::JobState state);

}  // namespace trainctl::coordinator
