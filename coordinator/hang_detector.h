#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "trainctl/v1/jobs.pb.h"
#include "trainctl/v1/workers.pb.h"

namespace trainctl::coordinator {

// Hang detection as pure functions over a job's per-rank progress
// (Job.progress), fed by the ranks' progress in agent heartbeats.

// Stores `beat` as the rank's progress; its changed time moves to `now_ms`
// only when step, collective number or phase differ from what was stored,
// its reported time always.
void RecordProgress(v1::Job& job, const v1::RankHeartbeat& beat,
                    int64_t now_ms);

// How long a rank may stay in one place, by what it is doing: evaluation,
// a checkpoint and a generation's first step may rightly outlast a step.
struct HangTimeouts {
  int64_t hang_ms = 0;  // anything else; 0: no hang detection
  int64_t eval_ms = 0;
  int64_t checkpoint_ms = 0;
  int64_t first_step_ms = 0;
  int64_t first_step = 0;  // the step the current generation started at

  // From the job's spec (fields 0 in a spec stored before they existed take
  // their default) and where its generation started.
  static HangTimeouts ForJob(const v1::Job& job);
};

// A description naming the stuck rank when some rank has not changed its
// progress for longer than its phase allows (ranks still starting up are
// left to the rendezvous timeout). The rank that is furthest behind is the
// one named: the others are waiting for it in the next collective. It says
// which bound was passed, unless the general one, and how old the rank's
// last report is (an old one: its node stopped reporting, not its loop):
//   "rank 1 on worker node-b stuck in compute at step 57 for 30 s, last
//    report 2 s ago (ranks 0, 2 wait in all-reduce #58)".
std::optional<std::string> FindHang(const v1::Job& job, int64_t now_ms,
                                    const HangTimeouts& timeouts);

}  // namespace trainctl::coordinator
