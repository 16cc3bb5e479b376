#pragma once

// The coordinator's own metrics for /metrics, as a pure function of a
// snapshot of jobs and workers (unit-tested without a server).

#include <cstdint>
#include <string>
#include <vector>

#include "coordinator/http/prometheus_text.h"
#include "coordinator/server_build.h"
#include "trainctl/v1/jobs.pb.h"

namespace trainctl::coordinator::http {

// Per-job series are kept for active jobs and for jobs that ended less than
// this long ago, so a scrape every 15-60 s still sees a short job's last
// values, while the history of finished jobs cannot grow the series count
// without bound.
inline constexpr int64_t kFinishedJobRetentionMs = 10 * 60 * 1000;

// Writes every trainctl_jobs*, trainctl_job_*, trainctl_workers and
// trainctl_slots_* / trainctl_worker_* family (docs/observability.md).
void WriteClusterMetrics(const std::vector<v1::Job>& jobs,
                         const std::vector<v1::WorkerInfo>& workers,
                         int64_t now_unix_ms, PrometheusText& out);

// trainctl_build_info (version, gRPC, Protobuf) and
// trainctl_coordinator_start_time_seconds.
void WriteBuildInfo(const ServerBuild& build, PrometheusText& out);

// "queued", "running", ...: the state label's values.
std::string StateLabel(v1::JobState state);

}  // namespace trainctl::coordinator::http
