#pragma once

// What the coordinator's HTTP port serves:
//   /metrics                    Prometheus text format 0.0.4
//   /healthz                    200 "ok" while serving, 503 once stopping
//   /api/jobs, /api/jobs/ID, /api/jobs/ID/events?from_seq=N&limit=M,
//   /api/workers                JSON for the dashboard
//   /, /jobs/ID                 the dashboard page; /static/FILE its files
// Read-only: nothing here changes a job.
//
// With a BearerCheck, /metrics and /api/ need "Authorization: Bearer TOKEN"
// of a person (401 without one, with WWW-Authenticate: Bearer); a user sees
// only the jobs they own (403 for another's job, and lists leave those out),
// an admin sees all. /healthz (probes) and the dashboard's page and files
// (which hold no data) stay open. Without one, everyone is an admin.

#include <atomic>
#include <string>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "coordinator/auth/caller.h"
#include "coordinator/event_hub.h"
#include "coordinator/http/http_request.h"
#include "coordinator/http/rpc_stats.h"
#include "coordinator/job_manager.h"
#include "coordinator/server_build.h"

namespace trainctl::coordinator::http {

class HttpRoutes {
 public:
  // `bearer_check` null: no authentication (an --insecure coordinator).
  HttpRoutes(JobManager& jobs, EventHub& events, const RpcStats& rpc_stats,
             const Clock& clock, const std::atomic<bool>& stopping,
             auth::BearerCheck bearer_check = nullptr, ServerBuild build = {})
      : jobs_(jobs),
        events_(events),
        rpc_stats_(rpc_stats),
        clock_(clock),
        stopping_(stopping),
        bearer_check_(std::move(bearer_check)),
        build_(std::move(build)) {}

  // Thread-safe; never blocks for long (no long-polls).
  HttpResponse Handle(const HttpRequest& request) const;

 private:
  // The person behind the request's Authorization header: UNAUTHENTICATED
  // (no, several or a bad header, or an unknown token) or PERMISSION_DENIED
  // (not a person's token), with the reason to show.
  absl::StatusOr<auth::Caller> Authenticate(const HttpRequest& request) const;
  HttpResponse Metrics(const auth::Caller& caller) const;
  HttpResponse Api(const std::string& path, const HttpRequest& request,
                   const auth::Caller& caller) const;
  HttpResponse Events(const std::string& job_id,
                      const HttpRequest& request) const;

  JobManager& jobs_;
  EventHub& events_;
  const RpcStats& rpc_stats_;
  const Clock& clock_;
  const std::atomic<bool>& stopping_;
  const auth::BearerCheck bearer_check_;
  const ServerBuild build_;
};

}  // namespace trainctl::coordinator::http
