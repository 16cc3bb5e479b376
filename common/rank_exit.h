#pragma once

#include "absl/status/status.h"

namespace trainctl {

// How a rank process tells the coordinator why it stopped, through its exit
// status alone (the one thing that survives any crash of the rank).
//
// The job cannot succeed as specified: a spec field, a data file or a
// checkpoint that does not fit. Restarting would fail the same way, so the
// coordinator fails the job at once instead of spending max_restarts.
// 78 is EX_CONFIG of sysexits.h.
inline constexpr int kRankExitConfigError = 78;

// The rank was asked to checkpoint and stop (SIGUSR1: the job was
// preempted), and did: every rank stopped after the same step and rank 0
// wrote its checkpoint. The job resumes from it. 75 is EX_TEMPFAIL.
inline constexpr int kRankExitStopped = 75;

// Whether a rank's failure with this code is deterministic (the job's input
// is at fault) rather than something a restart can cure (a lost peer, a
// full disk, a crash, memory).
inline bool IsConfigurationError(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kUnimplemented:
      return true;
    default:
      return false;
  }
}

// The exit status of a rank whose training ended with `status`.
inline int RankExitCode(const absl::Status& status) {
  if (status.ok()) return 0;
  return IsConfigurationError(status.code()) ? kRankExitConfigError : 1;
}

}  // namespace trainctl
