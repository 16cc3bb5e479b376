#include "worker/support/mlflow_run.h"

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cctype>
#include <cmath>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace trainctl {
namespace {

using google::protobuf::ListValue;
using google::protobuf::Struct;
using google::protobuf::Value;

constexpr size_t kMaxParamValue = 6000;  // MLflow's limit
constexpr int kParamsPerCall = 100;      // log-batch's limits
constexpr int kMetricsPerCall = 1000;

std::string ToJson(const google::protobuf::Message& message) {
  std::string json;
  (void)google::protobuf::util::MessageToJsonString(message, &json);
  return json;
}

Value StringValue(const std::string& s) {
  Value v;
  v.set_string_value(s);
  return v;
}

Value NumberValue(double d) {
  Value v;
  v.set_number_value(d);
  return v;
}

// {"key": k, "value": v}, as MLflow's tags and params are written.
Value KeyValue(const std::string& key, const std::string& value) {
  Value v;
  auto& fields = *v.mutable_struct_value()->mutable_fields();
  fields["key"] = StringValue(key);
  fields["value"] = StringValue(value);
  return v;
}

// The string at a dotted path of the JSON answer, or "".
std::string Field(const Struct& s, std::initializer_list<const char*> path) {
  const Struct* at = &s;
  const Value* value = nullptr;
  for (const char* key : path) {
    if (at == nullptr) return "";
    auto it = at->fields().find(key);
    if (it == at->fields().end()) return "";
    value = &it->second;
    at = value->has_struct_value() ? &value->struct_value() : nullptr;
  }
  return value != nullptr && value->has_string_value() ? value->string_value() : "";
}

absl::StatusOr<Struct> ParseAnswer(const std::string& json, const std::string& what) {
  Struct s;
  if (!google::protobuf::util::JsonStringToMessage(json.empty() ? "{}" : json, &s).ok()) {
    return absl::DataLossError(absl::StrCat(what, ": the answer is not JSON"));
  }
  return s;
}

std::string UrlEncode(const std::string& text) {
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += absl::StrFormat("%%%02X", c);
    }
  }
  return out;
}

void Flatten(const std::string& prefix, const Value& value,
             std::map<std::string, std::string>* out) {
  if (value.has_struct_value()) {
    for (const auto& [key, child] : value.struct_value().fields()) {
      Flatten(prefix.empty() ? key : absl::StrCat(prefix, ".", key), child, out);
    }
    return;
  }
  std::string text;
  if (value.has_string_value()) {
    text = value.string_value();
  } else if (value.has_number_value()) {
    text = absl::StrCat(value.number_value());
  } else if (value.has_bool_value()) {
    text = value.bool_value() ? "true" : "false";
  } else {
    text = ToJson(value);
  }
  if (text.size() > kMaxParamValue) text.resize(kMaxParamValue);
  (*out)[prefix] = text;
}

}  // namespace

HttpClientOptions MlflowHttpOptions(const std::function<const char*(const char*)>& getenv) {
  auto value = [&](const char* name) {
    const char* v = getenv(name);
    return std::string(v == nullptr ? "" : v);
  };
  HttpClientOptions options;
  const std::string user = value("MLFLOW_TRACKING_USERNAME");
  const std::string password = value("MLFLOW_TRACKING_PASSWORD");
  const std::string token = value("MLFLOW_TRACKING_TOKEN");
  if (!user.empty() && !password.empty()) {
    options.authorization = "Basic " + absl::Base64Escape(user + ":" + password);
  } else if (!token.empty()) {
    options.authorization = "Bearer " + token;
  }
  options.ca_file = value("MLFLOW_TRACKING_SERVER_CERT_PATH");
  options.verify = absl::AsciiStrToLower(value("MLFLOW_TRACKING_INSECURE_TLS")) != "true";
  return options;
}

std::map<std::string, std::string> FlattenForParams(const std::string& spec_json) {
  std::map<std::string, std::string> out;
  Value root;
  if (google::protobuf::util::JsonStringToMessage(spec_json, &root).ok()) {
    Flatten("", root, &out);
  }
  return out;
}

absl::StatusOr<std::string> MlflowRun::Call(const std::string& method,
                                            const std::string& api,
                                            const std::string& body) {
  const std::string url = absl::StrCat(server_, "/api/2.0/", api);
  ASSIGN_OR_RETURN(HttpResponse response,
                   http_.Send(method, url, body.empty() ? "" : "application/json", body));
  if (response.status >= 200 && response.status < 300) return std::move(response.body);
  // MLflow's errors: {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": ...}.
  absl::StatusOr<Struct> error = ParseAnswer(response.body, api);
  const std::string code = error.ok() ? Field(*error, {"error_code"}) : "";
  std::string message = error.ok() ? Field(*error, {"message"}) : "";
  if (message.size() > 300) message = absl::StrCat(message.substr(0, 300), "...");
  const std::string text =
      absl::StrCat("MLflow ", server_, ": ", api.substr(0, api.find('?')), " answered HTTP ",
                   response.status, code.empty() ? "" : absl::StrCat(" ", code),
                   message.empty() ? "" : absl::StrCat(": ", message));
  if (response.status == 401 || response.status == 403) {
    return absl::PermissionDeniedError(absl::StrCat(
        text, " (rank 0 sends the credentials of MLFLOW_TRACKING_USERNAME and "
              "MLFLOW_TRACKING_PASSWORD, or MLFLOW_TRACKING_TOKEN, from the "
              "worker's environment)"));
  }
  if (code == "RESOURCE_DOES_NOT_EXIST") return absl::NotFoundError(text);
  if (code == "RESOURCE_ALREADY_EXISTS") return absl::AlreadyExistsError(text);
  return absl::FailedPreconditionError(text);
}

absl::Status MlflowRun::FindOrCreateExperiment(const std::string& name) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    absl::StatusOr<std::string> found = Call(
        "GET", "mlflow/experiments/get-by-name?experiment_name=" + UrlEncode(name), "");
    if (found.ok()) {
      ASSIGN_OR_RETURN(Struct answer, ParseAnswer(*found, "experiments/get-by-name"));
      experiment_id_ = Field(answer, {"experiment", "experiment_id"});
      if (Field(answer, {"experiment", "lifecycle_stage"}) == "deleted") {
        return absl::FailedPreconditionError(absl::StrCat(
            "tracking.experiment: '", name, "' is deleted on ", server_,
            "; restore it there or name another"));
      }
      return absl::OkStatus();
    }
    if (!absl::IsNotFound(found.status())) return found.status();
    Struct create;
    (*create.mutable_fields())["name"] = StringValue(name);
    absl::StatusOr<std::string> created =
        Call("POST", "mlflow/experiments/create", ToJson(create));
    if (created.ok()) {
      ASSIGN_OR_RETURN(Struct answer, ParseAnswer(*created, "experiments/create"));
      experiment_id_ = Field(answer, {"experiment_id"});
      return absl::OkStatus();
    }
    // Another job created it between the two calls: look it up again.
    if (!absl::IsAlreadyExists(created.status())) return created.status();
  }
  return absl::UnavailableError(
      absl::StrCat("MLflow ", server_, ": experiment '", name, "' keeps changing"));
}

absl::Status MlflowRun::FindOrCreateRun(const Options& options) {
  Struct search;
  auto& s = *search.mutable_fields();
  s["experiment_ids"].mutable_list_value()->add_values()->set_string_value(experiment_id_);
  // Job ids and cluster names hold no quotes (job ids are job-N; the
  // cluster is a hex digest or host:port).
  s["filter"] = StringValue(absl::StrCat("tags.`trainctl.job_id` = '", options.job_id,
                                         "' and tags.`trainctl.cluster` = '",
                                         options.cluster, "'"));
  s["max_results"] = NumberValue(1);
  ASSIGN_OR_RETURN(std::string found, Call("POST", "mlflow/runs/search", ToJson(search)));
  ASSIGN_OR_RETURN(Struct answer, ParseAnswer(found, "runs/search"));
  auto runs = answer.fields().find("runs");
  if (runs != answer.fields().end() && runs->second.list_value().values_size() > 0) {
    const Struct& run = runs->second.list_value().values(0).struct_value();
    run_id_ = Field(run, {"info", "run_id"});
    artifact_uri_ = Field(run, {"info", "artifact_uri"});
    resumed_ = true;
    Struct update;
    (*update.mutable_fields())["run_id"] = StringValue(run_id_);
    (*update.mutable_fields())["status"] = StringValue("RUNNING");
    return Call("POST", "mlflow/runs/update", ToJson(update)).status();
  }
  Struct create;
  auto& c = *create.mutable_fields();
  c["experiment_id"] = StringValue(experiment_id_);
  c["run_name"] = StringValue(absl::StrCat(options.job_name, " (", options.job_id, ")"));
  c["start_time"] = NumberValue(static_cast<double>(options.start_unix_ms));
  ListValue& tags = *c["tags"].mutable_list_value();
  *tags.add_values() = KeyValue("trainctl.job_id", options.job_id);
  *tags.add_values() = KeyValue("trainctl.job_name", options.job_name);
  *tags.add_values() = KeyValue("trainctl.cluster", options.cluster);
  *tags.add_values() = KeyValue("mlflow.source.name", "trainctl");
  ASSIGN_OR_RETURN(std::string created, Call("POST", "mlflow/runs/create", ToJson(create)));
  ASSIGN_OR_RETURN(Struct run, ParseAnswer(created, "runs/create"));
  run_id_ = Field(run, {"run", "info", "run_id"});
  artifact_uri_ = Field(run, {"run", "info", "artifact_uri"});
  if (run_id_.empty()) {
    return absl::DataLossError(
        absl::StrCat("MLflow ", server_, ": runs/create answered without a run_id"));
  }
  return LogParams(options.params);
}

absl::Status MlflowRun::LogParams(const std::map<std::string, std::string>& params) {
  auto it = params.begin();
  while (it != params.end()) {
    Struct batch;
    (*batch.mutable_fields())["run_id"] = StringValue(run_id_);
    ListValue& list = *(*batch.mutable_fields())["params"].mutable_list_value();
    for (int n = 0; n < kParamsPerCall && it != params.end(); ++n, ++it) {
      *list.add_values() = KeyValue(it->first, it->second);
    }
    RETURN_IF_ERROR(Call("POST", "mlflow/runs/log-batch", ToJson(batch)).status());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MlflowRun>> MlflowRun::Open(HttpClient& http,
                                                           const Options& options) {
  std::unique_ptr<MlflowRun> run(
      new MlflowRun(http, std::string(absl::StripSuffix(options.server, "/"))));
  RETURN_IF_ERROR(run->FindOrCreateExperiment(options.experiment));
  RETURN_IF_ERROR(run->FindOrCreateRun(options));
  return run;
}

absl::StatusOr<int> MlflowRun::LogMetrics(int64_t step, int64_t time_unix_ms,
                                          const std::map<std::string, double>& values) {
  int skipped = 0;
  auto it = values.begin();
  while (it != values.end()) {
    Struct batch;
    (*batch.mutable_fields())["run_id"] = StringValue(run_id_);
    ListValue& list = *(*batch.mutable_fields())["metrics"].mutable_list_value();
    for (int n = 0; n < kMetricsPerCall && it != values.end(); ++it) {
      if (!std::isfinite(it->second)) {
        ++skipped;
        continue;
      }
      Value metric;
      auto& f = *metric.mutable_struct_value()->mutable_fields();
      f["key"] = StringValue(it->first);
      f["value"] = NumberValue(it->second);
      f["timestamp"] = NumberValue(static_cast<double>(time_unix_ms));
      f["step"] = NumberValue(static_cast<double>(step));
      *list.add_values() = std::move(metric);
      ++n;
    }
    if (list.values_size() == 0) break;
    RETURN_IF_ERROR(Call("POST", "mlflow/runs/log-batch", ToJson(batch)).status());
  }
  return skipped;
}

absl::Status MlflowRun::LogArtifact(const std::string& path, const std::string& bytes) {
  // "mlflow-artifacts:/1/<run>/artifacts" or "mlflow-artifacts://host/1/...":
  // the server's proxy stores it under the part after the scheme (and host).
  absl::string_view where = artifact_uri_;
  if (!absl::ConsumePrefix(&where, "mlflow-artifacts:")) {
    return absl::FailedPreconditionError(absl::StrCat(
        "MLflow ", server_, ": the run's artifacts go to ", artifact_uri_,
        ", which only the server's own clients reach; start the server with "
        "--serve-artifacts (the default) so it stores them"));
  }
  if (absl::ConsumePrefix(&where, "//")) where.remove_prefix(std::min(where.find('/'), where.size()));
  where = absl::StripPrefix(where, "/");
  const std::string url = absl::StrCat(server_, "/api/2.0/mlflow-artifacts/artifacts/",
                                       where, "/", path);
  ASSIGN_OR_RETURN(HttpResponse response,
                   http_.Send("PUT", url, "application/octet-stream", bytes));
  if (response.status >= 200 && response.status < 300) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "MLflow ", server_, ": storing artifact ", path, " answered HTTP ", response.status));
}

absl::Status MlflowRun::End(const std::string& status, int64_t end_unix_ms) {
  Struct update;
  auto& f = *update.mutable_fields();
  f["run_id"] = StringValue(run_id_);
  f["status"] = StringValue(status);
  f["end_time"] = NumberValue(static_cast<double>(end_unix_ms));
  return Call("POST", "mlflow/runs/update", ToJson(update)).status();
}

}  // namespace trainctl
