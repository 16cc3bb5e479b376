#pragma once

// Pure renderers: protos in, text out. No I/O and no clock reads; the
// caller passes "now" and the time zone so output is reproducible in tests.

#include <google/protobuf/message.h>

#include <cstdint>
#include <string>

#include "absl/time/time.h"
#include "trainctl/v1/jobs.pb.h"

namespace trainctl::client {

struct RenderContext {
  int64_t now_unix_ms = 0;
  absl::TimeZone tz = absl::UTCTimeZone();
  bool wide = false;  // --wide: every metric key, not the readable ones
};

// "120/1000", "120" when the total is unknown, "-" before the first step.
std::string FormatProgress(const v1::Job& job);
// pending_reason while QUEUED, else reason.
std::string JobReason(const v1::Job& job);

// What `list` shows without --all: every job that is not final, plus final
// jobs that finished within `keep` of now (a busy cluster's history would
// otherwise bury the jobs that matter). *hidden counts the rest.
v1::ListJobsResponse RecentJobs(const v1::ListJobsResponse& response,
                                int64_t now_unix_ms, absl::Duration keep,
                                int* hidden);

// `list`: ID NAME STATE RANKS STEP AGE REASON.
std::string RenderJobTable(const v1::ListJobsResponse& response,
                           const RenderContext& ctx);
// Its header, and one job's row of it (list -w prints rows as jobs change).
const std::vector<std::string>& JobTableHeader();
std::vector<std::string> JobTableRow(const v1::Job& job, const RenderContext& ctx);
// `status`: spec summary, state, ranks, transitions, progress, metrics.
std::string RenderJobStatus(const v1::Job& job, const RenderContext& ctx);
// `submit --dry-run`: what the coordinator would do (placement or why it
// would wait, slots needed vs free, the shard plan, total steps).
std::string RenderDryRunPlan(const v1::SubmitJobResponse& response);
// "1.1 GiB = parameters 210 MiB (55 M) + gradients ... + activations ...":
// one rank's memory plan, or why there is none.
std::string RenderMemoryPlan(const v1::MemoryPlan& plan, const v1::JobSpec& spec);
// `workers`: NAME ADDRESS SLOTS DEVICES LAST HEARTBEAT RUNNING, RUNNING as
// job:ranks ("job-3:0,1").
std::string RenderWorkerTable(const v1::ListWorkersResponse& response,
                              const RenderContext& ctx);

// STEP EPOCH SAMPLES RANKS SIZE AGE EVAL PATH, oldest first.
std::string RenderCheckpointTable(const v1::ListCheckpointsResponse& response,
                                  const RenderContext& ctx);
// One line (no newline) for a watch event. total_steps (0 if unknown) is
// shown next to the step of train metrics.
std::string RenderEventLine(const v1::JobEvent& event, int64_t total_steps,
                            const RenderContext& ctx);
// "invalid job spec FILE:" and then each "; "-separated problem of
// message on its own indented line.
std::string RenderSpecErrors(const std::string& path,
                             const std::string& message);

// Proto JSON with the proto field names and every primitive field;
// pretty=false gives one line (for JSONL streams).
std::string ToJson(const google::protobuf::Message& message, bool pretty);

}  // namespace trainctl::client
