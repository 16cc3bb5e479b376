// MlflowRun and MlflowSender against a scripted server: the REST calls in
// order with their JSON, a restarted generation finding its job's run, the
// artifact proxy's path, errors named. tests/integration/mlflow_test.cc has
// a real `mlflow server`.

#include "worker/support/mlflow_run.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>

#include <deque>
#include <mutex>

#include "worker/support/mlflow_sender.h"

namespace trainctl {
namespace {

using ::testing::HasSubstr;

struct Sent {
  std::string method, url, body;
};

// Answers requests from a script, in order; records what was sent.
class ScriptedHttp : public HttpClient {
 public:
  void Answer(long status, std::string body) { script_.push_back({status, std::move(body)}); }
  absl::StatusOr<HttpResponse> Send(const std::string& method, const std::string& url,
                                    const std::string& content_type,
                                    absl::string_view body) override {
    std::lock_guard<std::mutex> lock(mu_);
    sent_.push_back({method, url, std::string(body)});
    if (script_.empty()) return absl::UnavailableError(method + " " + url + ": refused");
    HttpResponse r = script_.front();
    script_.pop_front();
    return r;
  }
  std::vector<Sent> sent() {
    std::lock_guard<std::mutex> lock(mu_);
    return sent_;
  }

 private:
  std::mutex mu_;
  std::deque<HttpResponse> script_;
  std::vector<Sent> sent_;
};

// Whether the JSON body's list `field` holds {"key": key, "value": value}
// (a Struct's fields come in no fixed order).
bool HasPair(const std::string& body, const std::string& field, const std::string& key,
             const std::string& value) {
  google::protobuf::Struct parsed;
  if (!google::protobuf::util::JsonStringToMessage(body, &parsed).ok()) return false;
  auto list = parsed.fields().find(field);
  if (list == parsed.fields().end()) return false;
  for (const auto& item : list->second.list_value().values()) {
    const auto& f = item.struct_value().fields();
    if (f.count("key") && f.at("key").string_value() == key && f.count("value") &&
        f.at("value").string_value() == value) {
      return true;
    }
  }
  return false;
}

constexpr char kServer[] = "http://mlflow:5000";
constexpr char kNewRun[] =
    R"({"run": {"info": {"run_id": "r1", "artifact_uri": "mlflow-artifacts:/7/r1/artifacts"}}})";

MlflowRun::Options Options() {
  MlflowRun::Options o;
  o.server = std::string(kServer) + "/";
  o.experiment = "fashion mnist";
  o.job_id = "job-3";
  o.job_name = "mlp";
  o.cluster = "abc123";
  o.start_unix_ms = 1796000000000;
  o.params = {{"model.type", "mlp"}, {"optimizer.lr", "0.003"}};
  return o;
}

// Scripts an existing experiment and a new run (its answer to runs/create
// given), then opens the run; null, with a test failure, when it fails.
std::unique_ptr<MlflowRun> OpenNewRun(ScriptedHttp& http, const char* created = kNewRun) {
  http.Answer(200, R"({"experiment": {"experiment_id": "7"}})");
  http.Answer(200, R"({"runs": []})");
  http.Answer(200, created);
  http.Answer(200, "{}");  // params
  absl::StatusOr<std::unique_ptr<MlflowRun>> run = MlflowRun::Open(http, Options());
  EXPECT_TRUE(run.ok()) << run.status();
  return run.ok() ? *std::move(run) : nullptr;
}

TEST(MlflowRunTest, CreatesTheExperimentAndRunThenLogsParams) {
  ScriptedHttp http;
  http.Answer(404, R"({"error_code": "RESOURCE_DOES_NOT_EXIST", "message": "no"})");
  http.Answer(200, R"({"experiment_id": "7"})");
  http.Answer(200, R"({"runs": []})");
  http.Answer(200, kNewRun);
  http.Answer(200, "{}");  // params
  absl::StatusOr<std::unique_ptr<MlflowRun>> run = MlflowRun::Open(http, Options());
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ((*run)->run_id(), "r1");
  EXPECT_EQ((*run)->experiment_id(), "7");
  EXPECT_FALSE((*run)->resumed());
  const std::vector<Sent> sent = http.sent();
  ASSERT_EQ(sent.size(), 5u);
  EXPECT_EQ(sent[0].method, "GET");
  EXPECT_EQ(sent[0].url, std::string(kServer) +
                             "/api/2.0/mlflow/experiments/get-by-name?experiment_name=fashion%20mnist");
  EXPECT_EQ(sent[1].url, std::string(kServer) + "/api/2.0/mlflow/experiments/create");
  EXPECT_THAT(sent[1].body, HasSubstr(R"("name":"fashion mnist")"));
  EXPECT_THAT(sent[2].url, HasSubstr("/mlflow/runs/search"));
  EXPECT_THAT(sent[2].body, HasSubstr("tags.`trainctl.job_id` = 'job-3' and "
                                      "tags.`trainctl.cluster` = 'abc123'"));
  EXPECT_THAT(sent[3].url, HasSubstr("/mlflow/runs/create"));
  EXPECT_THAT(sent[3].body, HasSubstr(R"x("run_name":"mlp (job-3)")x"));
  EXPECT_THAT(sent[3].body, HasSubstr(R"("start_time":1796000000000)"));
  EXPECT_TRUE(HasPair(sent[3].body, "tags", "trainctl.cluster", "abc123")) << sent[3].body;
  EXPECT_THAT(sent[4].url, HasSubstr("/mlflow/runs/log-batch"));
  EXPECT_TRUE(HasPair(sent[4].body, "params", "optimizer.lr", "0.003")) << sent[4].body;
}

TEST(MlflowRunTest, ARestartedGenerationGoesOnInItsJobsRun) {
  ScriptedHttp http;
  http.Answer(200, R"({"experiment": {"experiment_id": "7", "lifecycle_stage": "active"}})");
  http.Answer(200, R"({"runs": [{"info": {"run_id": "r1",
                       "artifact_uri": "mlflow-artifacts:/7/r1/artifacts"}}]})");
  http.Answer(200, "{}");  // status RUNNING
  absl::StatusOr<std::unique_ptr<MlflowRun>> run = MlflowRun::Open(http, Options());
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_TRUE((*run)->resumed());
  const std::vector<Sent> sent = http.sent();
  ASSERT_EQ(sent.size(), 3u) << "no second run, no params again";
  EXPECT_THAT(sent[2].url, HasSubstr("/mlflow/runs/update"));
  EXPECT_THAT(sent[2].body, HasSubstr(R"("status":"RUNNING")"));
}

TEST(MlflowRunTest, MetricsArtifactAndEnd) {
  ScriptedHttp http;
  std::unique_ptr<MlflowRun> run = OpenNewRun(http);
  ASSERT_TRUE(run);
  http.Answer(200, "{}");
  absl::StatusOr<int> skipped = run->LogMetrics(
      40, 1796000001000, {{"train/loss", 0.5}, {"train/lr", std::nan("")}});
  ASSERT_TRUE(skipped.ok());
  EXPECT_EQ(*skipped, 1);
  http.Answer(200, "");
  ASSERT_TRUE(run->LogArtifact("model/model.safetensors", "bytes").ok());
  http.Answer(200, "{}");
  ASSERT_TRUE(run->End("FINISHED", 1796000002000).ok());
  const std::vector<Sent> sent = http.sent();
  ASSERT_EQ(sent.size(), 7u);
  EXPECT_THAT(sent[4].body, HasSubstr(R"("key":"train/loss")"));
  EXPECT_THAT(sent[4].body, HasSubstr(R"("step":40)"));
  EXPECT_THAT(sent[4].body, HasSubstr(R"("timestamp":1796000001000)"));
  EXPECT_THAT(sent[4].body, ::testing::Not(HasSubstr("train/lr")));
  EXPECT_EQ(sent[5].method, "PUT");
  EXPECT_EQ(sent[5].url, std::string(kServer) +
                             "/api/2.0/mlflow-artifacts/artifacts/7/r1/artifacts/model/"
                             "model.safetensors");
  EXPECT_EQ(sent[5].body, "bytes");
  EXPECT_THAT(sent[6].body, HasSubstr(R"("status":"FINISHED")"));
}

TEST(MlflowRunTest, ErrorsNameTheServerTheCallAndItsAnswer) {
  ScriptedHttp http;
  http.Answer(403, R"({"error_code": "PERMISSION_DENIED", "message": "token expired"})");
  absl::StatusOr<std::unique_ptr<MlflowRun>> run = MlflowRun::Open(http, Options());
  ASSERT_FALSE(run.ok());
  EXPECT_THAT(std::string(run.status().message()),
              ::testing::StartsWith("MLflow http://mlflow:5000: mlflow/experiments/"
                                    "get-by-name answered HTTP 403 PERMISSION_DENIED: "
                                    "token expired (rank 0 sends the credentials"));
  ScriptedHttp nobody;  // answers nothing: refused
  run = MlflowRun::Open(nobody, Options());
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kUnavailable);
}

TEST(MlflowRunTest, RefusedCredentialsSayWhereRankZeroTakesThemFrom) {
  ScriptedHttp http;
  http.Answer(401, "You are not authenticated.");  // basic-auth's plain text
  absl::StatusOr<std::unique_ptr<MlflowRun>> run = MlflowRun::Open(http, Options());
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(std::string(run.status().message()),
              HasSubstr("answered HTTP 401 (rank 0 sends the credentials of "
                        "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD, or "
                        "MLFLOW_TRACKING_TOKEN, from the worker's environment)"));
}

TEST(MlflowRunTest, CredentialsAndTlsComeFromMlflowsOwnVariables) {
  std::map<std::string, std::string> env;
  auto options = [&] {
    return MlflowHttpOptions([&](const char* name) -> const char* {
      auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    });
  };
  EXPECT_EQ(options().authorization, "");
  EXPECT_EQ(options().ca_file, "");
  EXPECT_TRUE(options().verify);
  env["MLFLOW_TRACKING_TOKEN"] = "t0k";
  EXPECT_EQ(options().authorization, "Bearer t0k");
  env["MLFLOW_TRACKING_USERNAME"] = "admin";
  EXPECT_EQ(options().authorization, "Bearer t0k") << "a user without a password";
  env["MLFLOW_TRACKING_PASSWORD"] = "pw";
  EXPECT_EQ(options().authorization, "Basic YWRtaW46cHc=") << "as MLflow: basic first";
  env["MLFLOW_TRACKING_SERVER_CERT_PATH"] = "/etc/ssl/mlflow.pem";
  env["MLFLOW_TRACKING_INSECURE_TLS"] = "True";
  EXPECT_EQ(options().ca_file, "/etc/ssl/mlflow.pem");
  EXPECT_FALSE(options().verify);
}

TEST(MlflowRunTest, ArtifactsOutsideTheServersProxyAreRefusedWithTheFix) {
  ScriptedHttp http;
  std::unique_ptr<MlflowRun> run = OpenNewRun(
      http, R"({"run": {"info": {"run_id": "r1", "artifact_uri": "s3://bucket/7/r1"}}})");
  ASSERT_TRUE(run);
  absl::Status stored = run->LogArtifact("model/model.safetensors", "x");
  EXPECT_EQ(stored.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(stored.message()), HasSubstr("--serve-artifacts"));
}

TEST(MlflowRunTest, TheSpecFlattensIntoParams) {
  const std::map<std::string, std::string> params = FlattenForParams(
      R"({"name": "mlp", "model": {"type": "mlp", "hidden": [64, 32]},
          "optimizer": {"lr": 0.003}, "training": {"epochs": 2, "checkpointing": false}})");
  EXPECT_EQ(params.at("name"), "mlp");
  EXPECT_EQ(params.at("model.type"), "mlp");
  EXPECT_EQ(params.at("model.hidden"), "[64,32]");
  EXPECT_EQ(params.at("optimizer.lr"), "0.003");
  EXPECT_EQ(params.at("training.epochs"), "2");
  EXPECT_EQ(params.at("training.checkpointing"), "false");
}

TEST(MlflowSenderTest, SendsInOrderOffTheCallersThreadAndEndsTheRun) {
  auto http = std::make_unique<ScriptedHttp>();
  ScriptedHttp* server = http.get();
  std::unique_ptr<MlflowRun> run = OpenNewRun(*server);
  ASSERT_TRUE(run);
  for (int i = 0; i < 4; ++i) server->Answer(200, "{}");  // 3 batches and the end
  std::vector<std::string> warnings;
  {
    MlflowSender sender(std::move(http), std::move(run),
                        [&](const std::string& w) { warnings.push_back(w); });
    for (int step = 1; step <= 3; ++step) sender.Log(step, 1000 + step, {{"train/loss", 1.0 / step}});
    EXPECT_TRUE(sender.Close("FINISHED", {}, 2000).ok());
    const std::vector<Sent> sent = server->sent();
    ASSERT_EQ(sent.size(), 8u);
    for (int step = 1; step <= 3; ++step) {
      EXPECT_THAT(sent[3 + step].body, HasSubstr("\"step\":" + std::to_string(step)));
    }
    EXPECT_THAT(sent[7].body, HasSubstr(R"("status":"FINISHED")"));
  }
  EXPECT_TRUE(warnings.empty());
}

TEST(MlflowSenderTest, AFailingServerIsSaidOnceAndTrainingGoesOn) {
  auto http = std::make_unique<ScriptedHttp>();
  ScriptedHttp* server = http.get();
  std::unique_ptr<MlflowRun> run = OpenNewRun(*server);
  ASSERT_TRUE(run);
  std::vector<std::string> warnings;
  MlflowSender sender(std::move(http), std::move(run),
                      [&](const std::string& w) { warnings.push_back(w); });
  for (int step = 1; step <= 5; ++step) sender.Log(step, 1000, {{"train/loss", 1.0}});
  const absl::Status closed = sender.Close("", {}, 2000);  // the script is empty: refused
  EXPECT_EQ(closed.code(), absl::StatusCode::kUnavailable);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("training goes on"));
  EXPECT_EQ(server->sent().size(), 4u + 5u) << "no status update when left running";
}

}  // namespace
}  // namespace trainctl
