#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/support/http_client.h"

namespace trainctl {

// A job's run on an MLflow tracking server, through its REST API
// (/api/2.0/mlflow/...): what rank 0 logs for `tracking: {mlflow: URI}`.
//
// One run per job: a restarted generation finds the run its job made
// before (by the tags trainctl.job_id and trainctl.cluster) and goes on
// logging into it, so a job is one run however often it restarts. Not
// thread-safe; MlflowSender calls it from one thread.
class MlflowRun {
 public:
  struct Options {
    std::string server;      // http(s)://host:port
    std::string experiment;  // created when missing
    std::string job_id;
    std::string job_name;    // the run's name
    std::string cluster;     // tells one coordinator's job-3 from another's
    int64_t start_unix_ms = 0;
    // Logged when the run is created (a run's params cannot change).
    std::map<std::string, std::string> params;
  };

  // Finds or creates the experiment and the run, and marks it RUNNING.
  // Errors name the server and the call; the server's own message is kept
  // (it is the server's text, not the job's data).
  static absl::StatusOr<std::unique_ptr<MlflowRun>> Open(HttpClient& http,
                                                         const Options& options);

  const std::string& run_id() const { return run_id_; }
  const std::string& experiment_id() const { return experiment_id_; }
  // Whether Open found the run of an earlier generation.
  bool resumed() const { return resumed_; }

  // One log-batch call per 1,000 values. Non-finite values are left out
  // (JSON cannot carry them); their count is returned.
  absl::StatusOr<int> LogMetrics(int64_t step, int64_t time_unix_ms,
                                 const std::map<std::string, double>& values);
  // Stores `bytes` as the run's artifact `path` ("model/model.safetensors")
  // through the server's artifact proxy (mlflow server --serve-artifacts,
  // the default). FAILED_PRECONDITION when the run's artifacts live
  // elsewhere (s3://, a path), which only the server's clients can reach.
  absl::Status LogArtifact(const std::string& path, const std::string& bytes);
  // The run's status: FINISHED or FAILED, with the end time.
  absl::Status End(const std::string& status, int64_t end_unix_ms);

 private:
  MlflowRun(HttpClient& http, std::string server) : http_(http), server_(std::move(server)) {}

  // POST (or GET when `body` is empty and `get`) of an MLflow API call; the
  // answer's JSON. NOT_FOUND for RESOURCE_DOES_NOT_EXIST, ALREADY_EXISTS
  // for RESOURCE_ALREADY_EXISTS, other failures named.
  absl::StatusOr<std::string> Call(const std::string& method, const std::string& api,
                                   const std::string& body);
  absl::Status FindOrCreateExperiment(const std::string& name);
  absl::Status FindOrCreateRun(const Options& options);
  absl::Status LogParams(const std::map<std::string, std::string>& params);

  HttpClient& http_;
  const std::string server_;
  std::string experiment_id_;
  std::string run_id_;
  std::string artifact_uri_;
  bool resumed_ = false;
};

// How MLflow's own clients reach the server, from their environment
// variables: MLFLOW_TRACKING_USERNAME and _PASSWORD (Basic), else
// MLFLOW_TRACKING_TOKEN (Bearer); MLFLOW_TRACKING_SERVER_CERT_PATH (a CA
// bundle for https); MLFLOW_TRACKING_INSECURE_TLS=true (no verification).
// `getenv` is std::getenv in production.
HttpClientOptions MlflowHttpOptions(const std::function<const char*(const char*)>& getenv);

// The job spec (its proto JSON) as MLflow params: nested fields joined by
// dots ("optimizer.lr"), lists as JSON text, values cut to MLflow's 6,000
// characters.
std::map<std::string, std::string> FlattenForParams(const std::string& spec_json);

}  // namespace trainctl
