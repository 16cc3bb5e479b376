#pragma once

// What a job used, for `trainctl history` (GetHistory): pure functions of
// the job's record, its transitions above all. Each transition to RUNNING
// carries the generation's slots, so every RUNNING period is charged with
// the ranks it really held, elastic resizes and restarts included.

#include <cstdint>

#include "trainctl/v1/jobs.pb.h"

namespace trainctl::coordinator {

// The accounting window: [since_ms, until_ms); 0 means open on that side
// (from the first job, up to now).
struct AccountWindow {
  int64_t since_ms = 0;
  int64_t until_ms = 0;
};

// The job existed at some time in the window: submitted before its end and
// not finished before its start.
bool ExistedIn(const v1::Job& job, const AccountWindow& window);

// The job's accounting as of `now_ms`: times from its transitions, slot
// and GPU time of its RUNNING periods cut to the window (a running job's
// current period up to now), its final train and eval points.
v1::JobAccount AccountJob(const v1::Job& job, const AccountWindow& window,
                          int64_t now_ms);

}  // namespace trainctl::coordinator
