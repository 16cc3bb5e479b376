#include "coordinator/http/http_routes.h"

#include <algorithm>
#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "coordinator/caller_view.h"
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
    case absl::StatusCode::kUnauthenticated: return 401;
    case absl::StatusCode::kPermissionDenied: return 403;
    case absl::StatusCode::kUnavailable: return 503;
    default: return 500;
  }
}

// The answer to a refused or failed authentication: JSON for the API, one
// text line for /metrics; a 401 says how to authenticate (RFC 6750), and
// whether the token sent was the problem.
HttpResponse AuthRefusal(const absl::Status& status, bool json,
                         bool token_sent) {
  const int code = HttpStatusOf(status);
  // One line, whatever the token store said.
  const std::string reason = absl::StrReplaceAll(
      status.message(), {{"\r", " "}, {"\n", " "}});
  HttpResponse response = json ? Json(code, ErrorJson(reason))
                               : Text(code, reason + "\n");
  if (code == 401) {
    response.headers.emplace_back(
        "WWW-Authenticate",
        token_sent ? R"(Bearer realm="trainctl", error="invalid_token")"
                   : R"(Bearer realm="trainctl")");
  }
  return response;
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
  const bool api = absl::StartsWith(path, "/api/");
  if (path == "/metrics" || api) {
    absl::StatusOr<auth::Caller> caller = Authenticate(request);
    if (!caller.ok()) {
      bool token_sent = false;
      for (const auto& header : request.headers) {
        token_sent |= header.first == "authorization";
      }
      return AuthRefusal(caller.status(), api, token_sent);
    }
    return api ? Api(path.substr(4), request, *caller) : Metrics(*caller);
  }
  if (path == "/" || path == "/compare" || absl::StartsWith(path, "/jobs/")) {
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

absl::StatusOr<auth::Caller> HttpRoutes::Authenticate(
    const HttpRequest& request) const {
  if (!bearer_check_) return auth::Caller::Unauthenticated();
  const std::string* authorization = nullptr;
  for (const auto& [name, value] : request.headers) {
    if (name != "authorization") continue;
    if (authorization != nullptr) {
      return absl::UnauthenticatedError(
          "more than one Authorization header; send exactly one");
    }
    authorization = &value;
  }
  if (authorization == nullptr) {
    return absl::UnauthenticatedError(
        "this needs a token: send the header \"Authorization: Bearer "
        "TOKEN\" (the dashboard takes one in its URL as #token=TOKEN)");
  }
  absl::StatusOr<auth::Caller> caller = bearer_check_(*authorization);
  if (!caller.ok()) return caller.status();
  if (!caller->IsPerson()) {
    return absl::PermissionDeniedError(absl::StrCat(
        "\"", caller->name, "\" is not a person; use a user's or an admin's "
        "token"));
  }
  return caller;
}

HttpResponse HttpRoutes::Metrics(const auth::Caller& caller) const {
  PrometheusText out;
  // A user's scrape covers their own jobs; an admin's (Prometheus's token
  // should be one) the whole cluster.
  WriteBuildInfo(build_, out);
  WriteClusterMetrics(CallerView(jobs_, caller).Jobs(), jobs_.Workers(),
                      clock_.NowUnixMs(), out);
  rpc_stats_.WriteTo(out);
  return HttpResponse{200, kPrometheusContentType, out.text(), {}};
}

HttpResponse HttpRoutes::Api(const std::string& path,
                             const HttpRequest& request,
                             const auth::Caller& caller) const {
  const CallerView view(jobs_, caller);
  if (path == "/jobs") return Json(200, JobListJson(view.Jobs()));
  if (path == "/workers") return Json(200, WorkersJson(view.Workers()));
  // Everyone sees the whole queue; other users' job names only admins.
  if (path == "/queue") {
    return Json(200, QueueJson(jobs_.Queue(caller.IsAdmin() ? nullptr
                                                            : &caller.name)));
  }
  const std::vector<std::string> parts =
      absl::StrSplit(path.substr(1), '/');  // "jobs", ID[, "events"]
  if (parts.size() >= 2 && parts.size() <= 3 && parts[0] == "jobs" &&
      !parts[1].empty()) {
    if (parts.size() == 3 && parts[2] != "events") {
      return Json(404, ErrorJson("no such API path: /api" + path));
    }
    // Unknown ids are refused before the EventHub is asked: it would keep
    // an empty log for any id it is asked about.
    absl::StatusOr<v1::Job> job = view.Job(parts[1], "read");
    if (!job.ok()) {
      return Json(HttpStatusOf(job.status()),
                  ErrorJson(std::string(job.status().message())));
    }
    return parts.size() == 3 ? Events(parts[1], request)
                             : Json(200, JobJson(*job));
  }
  return Json(404, ErrorJson("no such API path: /api" + path));
}

HttpResponse HttpRoutes::Events(const std::string& job_id,
                                const HttpRequest& request) const {
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
  absl::StatusOr<std::vector<v1::JobEvent>> events =
      events_.WaitForEvents(job_id, from_seq, 0, &closed,
                            static_cast<size_t>(limit));
  if (!events.ok()) {
    return Json(503, ErrorJson(std::string(events.status().message())));
  }
  return Json(200, EventsJson(*events, from_seq + events->size(), closed));
}

}  // namespace trainctl::coordinator::http
