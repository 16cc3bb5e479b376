#pragma once

// What the coordinator's HTTP port serves:
//   /metrics                    Prometheus text format 0.0.4
//   /healthz                    200 "ok" while serving, 503 once stopping
//   /api/jobs, /api/jobs/ID, /api/jobs/ID/events?from_seq=N&limit=M,
//   /api/workers                JSON for the dashboard
//   /, /jobs/ID                 the dashboard page; /static/FILE its files
// Read-only: nothing here changes a job (the port has no authentication).

#include <atomic>

#include "common/clock.h"
#include "coordinator/event_hub.h"
#include "coordinator/http/http_request.h"
#include "coordinator/http/rpc_stats.h"
#include "coordinator/job_manager.h"

namespace trainctl::coordinator::http {

class HttpRoutes {
 public:
  HttpRoutes(JobManager& jobs, EventHub& events, const RpcStats& rpc_stats,
             const Clock& clock, const std::atomic<bool>& stopping)
      : jobs_(jobs),
        events_(events),
        rpc_stats_(rpc_stats),
        clock_(clock),
        stopping_(stopping) {}

  // Thread-safe; never blocks for long (no long-polls).
  HttpResponse Handle(const HttpRequest& request) const;

 private:
  HttpResponse Metrics() const;
  HttpResponse Api(const std::string& path, const HttpRequest& request) const;
  HttpResponse Events(const std::string& job_id,
                      const HttpRequest& request) const;

  JobManager& jobs_;
  EventHub& events_;
  const RpcStats& rpc_stats_;
  const Clock& clock_;
  const std::atomic<bool>& stopping_;
};

}  // namespace trainctl::coordinator::http
