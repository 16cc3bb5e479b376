#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace trainctl {

struct HttpResponse {
  long status = 0;   // the HTTP status code
  std::string body;
};

// One HTTP request at a time, for clients of web APIs (mlflow_run.h). An
// interface so tests can answer in place of a server.
class HttpClient {
 public:
  virtual ~HttpClient() = default;
  // UNAVAILABLE when no answer came (refused, timed out, TLS failed), naming
  // the URL without its query; any HTTP status is an answer.
  virtual absl::StatusOr<HttpResponse> Send(const std::string& method,
                                            const std::string& url,
                                            const std::string& content_type,
                                            absl::string_view body) = 0;
};

struct HttpClientOptions {
  absl::Duration timeout = absl::Seconds(30);  // each request, whole
  // Every request's Authorization header ("Basic ...", "Bearer ..."); it
  // never appears in an error.
  std::string authorization;
  // https: the CA bundle (PEM) to verify the server with; empty: the
  // system's. `verify` false skips verification (MLflow's insecure TLS).
  std::string ca_file;
  bool verify = true;
};

// libcurl. Null when this build has no libcurl (TRAINCTL_HAVE_CURL unset).
std::unique_ptr<HttpClient> MakeCurlHttpClient(HttpClientOptions options);

}  // namespace trainctl
