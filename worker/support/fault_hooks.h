#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include <vector>

#include "absl/status/statusor.h"

namespace trainctl::train {

// Test-only fault injection and recording, read by the rank process from its
// environment (the agent's environment is inherited). Never set in
// production; documented in docs/architecture.md for test authors.
//
// TRAINCTL_FAULT: ';'-separated "KIND:rank=R,step=S[,generation=G][,job=N]"
// where
//   hang                 the rank stops making progress before step S
//   exit                 the rank exits with code 3 before step S (with
//                        ms=N, after waiting N ms)
//   exit_after_update    the rank exits with code 3 right after step S's
//                        optimizer update, before the step's end
//   crash_in_checkpoint  the rank dies halfway through writing the
//                        checkpoint of step S
//   inf_gradient         the gradients of step S come out non-finite (the
//                        loss is scaled by inf before backward, as an fp16
//                        overflow would leave them)
//   slow_join            (step=0) the rank waits 8 s before it joins its
//                        group, so its peers wait in the rendezvous
//   wait_for_stop        the rank waits before step S until it is asked to
//                        checkpoint and stop (a preemption arrives at a
//                        known step)
//   slow_compute         from step S on, the rank's forward and backward
//                        take ms=N milliseconds longer (a straggler)
//   exit_in_regroup      the rank exits with code 3 when a collective of
//                        step S failed, before it asks for its place in
//                        the next generation (lost during an in-place
//                        recovery)
//   freeze_before_state  a rank that is to take the training state in an
//                        in-place recovery resuming at step S stops its
//                        worker and itself (SIGSTOP) just before: no exit,
//                        no TCP reset, no heartbeat, as a node cut off the
//                        network during the state's transfer
// generation defaults to 1, so a restarted generation runs clean; job=N
// limits the entry to job-N (ForJob), so other jobs of the cluster run clean.
// TRAINCTL_SAMPLE_LOG=DIR: every rank appends, per micro-batch, a line
// "STEP SAMPLE_ID..." to DIR/<job>-g<generation>-r<rank>.samples.
class FaultHooks {
 public:
  // INVALID_ARGUMENT naming the entry that does not parse.
  static absl::StatusOr<FaultHooks> Parse(absl::string_view faults);
  // From the environment; a malformed TRAINCTL_FAULT is reported on stderr
  // and ignored.
  static FaultHooks FromEnvironment();

  // Without the entries of other jobs than `job_id`.
  FaultHooks ForJob(const std::string& job_id) const;

  // For kinds that last (slow_compute): the entry's ms from its step on.
  int64_t DelayMs(absl::string_view kind, int rank, int generation,
                  int64_t step) const;

  bool Fires(absl::string_view kind, int rank, int generation,
             int64_t step) const;

  std::string sample_log_dir;

 private:
  struct Fault {
    std::string kind;
    int rank = 0;
    int64_t step = 0;
    int generation = 1;
    int64_t job = 0;  // job-N only; 0: every job
    int64_t ms = 0;   // slow_compute: the delay
  };
  std::vector<Fault> faults_;
};

}  // namespace trainctl::train
