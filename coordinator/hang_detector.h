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
// only when step, collective number or phase differ from what was stored.
void RecordProgress(v1::Job& job, const v1::RankHeartbeat& beat,
                    int64_t now_ms);

// A description naming the stuck rank when some rank has not changed its
// progress for `timeout_ms` (ranks still starting up are left to the
// rendezvous timeout). The rank that is furthest behind is the one named:
// the others are waiting for it in the next collective, e.g.
//   "rank 1 on worker node-b stuck in compute at step 57 for 30 s (ranks 0, 2
//    wait in all-reduce #58)".
std::optional<std::string> FindHang(const v1::Job& job, int64_t now_ms,
                                    int64_t timeout_ms);

}  // namespace trainctl::coordinator
