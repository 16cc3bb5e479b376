#include "coordinator/http/http_routes.h"

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "coordinator/http/coordinator_metrics.h"
#include "coordinator/http/dashboard_api.h"
#include "coordinator/http/dashboard_assets.h"

namespace trainctl::coordinator::http {
namespace {

// The dashboard runs only its own files: scripts, styles and requests are
// limited to this origin, so even a rendering mistake with user data (job
// names, log lines) cannot load or run anything else.
constexpr char kContentSecurityPolicy[] =
    "default-src 'none'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; img-src 'self'; base-uri 'none'; "
    "form-action 'none'; frame-ancestors 'none'";

HttpResponse Text(int status, std::string body) {
  return HttpResponse{status, "text/plain; charset=utf-8", std::move(body),
                      {}};
}

HttpResponse Json(int status, std::string body) {
  return HttpResponse{status, "application/json", std::move(body), {}};
}

HttpResponse Asset(const std::string& name) {
  const EmbeddedAsset* asset = FindDashboardAsset(name);
  if (asset == nullptr) return Text(404, "Not Found\n");
  HttpResponse response;
  response.body.assign(reinterpret_cast<const char*>(asset->data),
                       asset->size);
  if (absl::EndsWith(name, ".html")) {
    response.content_type = "text/html; charset=utf-8";
  } else if (absl::EndsWith(name, ".js")) {
    response.content_type = "text/javascript; charset=utf-8";
  } else if (absl::EndsWith(name, ".css")) {
    response.content_type = "text/css; charset=utf-8";
  }
  response.headers.emplace_back("Content-Security-Policy",
                                kContentSecurityPolicy);
  return response;
}

int HttpStatusOf(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kNotFound: return 404;
    case absl::StatusCode::kInvalidArgument: return 400;
    default: return 500;
  }
}

// A non-negative integer query parameter, or `fallback` when absent; false
// when present and not such a number.
bool QueryInt(const HttpRequest& request, const char* key, int64_t fallback,
              int64_t* out) {
  auto it = request.query.find(key);
  if (it == request.query.end()) {
    *out = fallback;
    return true;
  }
  return absl::SimpleAtoi(it->second, out) && *out >= 0;
}

}  // namespace

HttpResponse HttpRoutes::Handle(const HttpRequest& request) const {
  const std::string& path = request.path;
  if (path == "/healthz") {
    // Same meaning as grpc.health.v1 (docs/deploy.md): this port only
    // starts after recovery, and reports 503 from the start of shutdown.
    return stopping_.load() ? Text(503, "shutting down\n") : Text(200, "ok\n");
  }
  if (path == "/metrics") return Metrics();
  if (absl::StartsWith(path, "/api/")) return Api(path.substr(4), request);
  if (path == "/" || absl::StartsWith(path, "/jobs/")) {
    return Asset("index.html");
  }
  if (absl::StartsWith(path, "/static/")) {
    const std::string name = path.substr(8);
    // Assets are a flat set of names; nothing else is looked up.
    if (name.find('/') != std::string::npos) return Text(404, "Not Found\n");
    return Asset(name);
  }
  return Text(404, "Not Found\n");
}

HttpResponse HttpRoutes::Metrics() const {
  PrometheusText out;
  WriteClusterMetrics(jobs_.List({}), jobs_.Workers(), clock_.NowUnixMs(),
                      out);
  rpc_stats_.WriteTo(out);
  return HttpResponse{200, kPrometheusContentType, out.text(), {}};
}

HttpResponse HttpRoutes::Api(const std::string& path,
                             const HttpRequest& request) const {
  if (path == "/jobs") return Json(200, JobListJson(jobs_.List({})));
  if (path == "/workers") return Json(200, WorkersJson(jobs_.Workers()));
  const std::vector<std::string> parts =
      absl::StrSplit(path.substr(1), '/');  // "jobs", ID[, "events"]
  if (parts.size() >= 2 && parts.size() <= 3 && parts[0] == "jobs" &&
      !parts[1].empty()) {
    if (parts.size() == 3) {
      if (parts[2] == "events") return Events(parts[1], request);
    } else {
      absl::StatusOr<v1::Job> job = jobs_.Get(parts[1]);
      if (!job.ok()) {
        return Json(HttpStatusOf(job.status()),
                    ErrorJson(std::string(job.status().message())));
      }
      return Json(200, JobJson(*job));
    }
  }
  return Json(404, ErrorJson("no such API path: /api" + path));
}

HttpResponse HttpRoutes::Events(const std::string& job_id,
                                const HttpRequest& request) const {
  // Unknown ids are refused before the EventHub is asked: it would keep an
  // empty log for any id it is asked about.
  absl::StatusOr<v1::Job> job = jobs_.Get(job_id);
  if (!job.ok()) {
    return Json(HttpStatusOf(job.status()),
                ErrorJson(std::string(job.status().message())));
  }
  int64_t from_seq = 0, limit = 0;
  if (!QueryInt(request, "from_seq", 1, &from_seq) ||
      !QueryInt(request, "limit", kMaxEventsPerResponse, &limit) ||
      limit == 0) {
    return Json(400, ErrorJson("from_seq and limit must be integers >= 0 "
                               "(limit >= 1)"));
  }
  from_seq = std::max<int64_t>(1, from_seq);
  limit = std::min(limit, kMaxEventsPerResponse);
  bool closed = false;
  std::vector<v1::JobEvent> events =
      events_.WaitForEvents(job_id, from_seq, 0, &closed);
  if (static_cast<int64_t>(events.size()) > limit) {
    events.resize(limit);
    closed = false;  // more to fetch
  }
  return Json(200, EventsJson(events, from_seq + events.size(), closed));
}

}  // namespace trainctl::coordinator::http
