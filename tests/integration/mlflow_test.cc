// tracking.mlflow against a real `mlflow server` on loopback (mlflow from
// PyPI) as a production one runs: MLflow's basic-auth app, https with a
// private CA. A job's run as the mlflow client reads it (params, metrics
// every logged step, the final model file, status), rank 0 signing in and
// verifying the server with the MLFLOW_TRACKING_* variables of its
// worker's environment; a server rank 0 cannot reach failing the job with a
// reason that names it.

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "local_cluster.h"

namespace trainctl::testing {
namespace {

using ::testing::HasSubstr;
using std::chrono::seconds;

const std::string kData = "/usr/share/datasets/fashion-mnist/";
constexpr char kAdminPassword[] = "trainctl-test-password";

class MlflowTest : public SharedClusterTest {
 protected:
  // The workers (and so their ranks) inherit this process's environment,
  // as a worker started by systemd gets its unit's Environment=.
  static void SetUpTestSuite() {
    char tls_dir[] = "/tmp/trainctl-mlflow-tls.XXXXXX";
    ASSERT_NE(mkdtemp(tls_dir), nullptr);
    tls_dir_ = tls_dir;
    setenv("MLFLOW_TEST_TLS_DIR", tls_dir, 1);  // mlflow_server.sh makes the cert
    setenv("MLFLOW_TRACKING_SERVER_CERT_PATH", (tls_dir_ + "/cert.pem").c_str(), 1);
    setenv("MLFLOW_TRACKING_USERNAME", "admin", 1);
    setenv("MLFLOW_TRACKING_PASSWORD", kAdminPassword, 1);
    SharedClusterTest::SetUpTestSuite();
  }
  static void TearDownTestSuite() {
    SharedClusterTest::TearDownTestSuite();
    std::filesystem::remove_all(tls_dir_);
  }

  // Only the test that reads a run back needs the server, and starting one
  // costs that test tens of seconds.
  void StartServer() {
    const std::string dir = cluster_->dir() + "/mlflow";
    std::filesystem::create_directories(dir);
    const std::string port_file = dir + "/port";
    std::filesystem::remove(port_file);  // an earlier test's server's
    server_ = std::make_unique<Process>(
        std::vector<std::string>{"/usr/bin/env", "TRAINCTL_BUILD_DIR=" TRAINCTL_BIN_DIR "/..",
                                 std::string("MLFLOW_AUTH_ADMIN_PASSWORD=") + kAdminPassword,
                                 "bash", TRAINCTL_SOURCE_DIR "/tests/integration/mlflow_server.sh",
                                 dir, port_file},
        dir + "/server.log");
    // Installing mlflow the first time takes a minute or two.
    for (int i = 0; i < 600 && server_->Running(); ++i) {
      std::ifstream in(port_file);
      if (in >> port_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    const int code = server_->Wait(seconds(1));
    std::ifstream log(dir + "/server.log");
    const std::string text((std::istreambuf_iterator<char>(log)), {});
    if (code == 77) GTEST_SKIP() << text;
    FAIL() << "mlflow server did not start (exit " << code << "):\n" << text;
  }

  void TearDown() override {
    if (server_ && server_->Running()) {
      server_->Signal(SIGTERM);  // the script takes uvicorn with it
      server_->Wait(seconds(30));
    }
  }

  std::string Uri() const { return "https://127.0.0.1:" + std::to_string(port_); }

  // mlflow_check.py's answer for the job, read with the mlflow client.
  google::protobuf::Struct Check(const std::string& experiment, const std::string& job_id) {
    const std::string log = cluster_->dir() + "/mlflow/check-" + job_id + ".log";
    const std::string command = std::string(TRAINCTL_BIN_DIR) + "/../mlflow-venv/bin/python " +
                                TRAINCTL_SOURCE_DIR "/tests/integration/mlflow_check.py " +
                                Uri() + " '" + experiment + "' " + job_id + " > " + log +
                                " 2>&1";
    EXPECT_EQ(std::system(command.c_str()), 0);
    std::ifstream in(log);
    std::string line, last;
    while (std::getline(in, line)) last = line;
    google::protobuf::Struct out;
    EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(last, &out).ok()) << last;
    return out;
  }

  static std::string tls_dir_;
  std::unique_ptr<Process> server_;
  int port_ = 0;
};

std::string MlflowTest::tls_dir_;

const google::protobuf::Value& At(const google::protobuf::Struct& s, const std::string& key) {
  static const google::protobuf::Value kNull;
  auto it = s.fields().find(key);
  return it == s.fields().end() ? kNull : it->second;
}

TEST_F(MlflowTest, AJobsRunHoldsItsParamsMetricsAndModel) {
  StartServer();
  if (IsSkipped() || HasFatalFailure()) return;
  const std::string spec = cluster_->WriteFile(
      "tracked.yaml",
      "name: tracked-mlp\nranks: 2\nseed: 5\nmodel: {type: mlp, hidden: [32]}\n"
      "data:\n  train_images: " + kData + "train-images-idx3-ubyte.gz\n"
      "  train_labels: " + kData + "train-labels-idx1-ubyte.gz\n"
      "  eval_images: " + kData + "t10k-images-idx3-ubyte.gz\n"
      "  eval_labels: " + kData + "t10k-labels-idx1-ubyte.gz\n"
      "  train_limit: 2048\n  eval_limit: 500\n"
      "optimizer: {type: adamw, lr: 0.003}\n"
      "training: {epochs: 2, batch_size: 64, log_every_steps: 8}\n"
      "tracking: {mlflow: '" + Uri() + "', experiment: fashion mnist}\n");
  CliResult submit = cluster_->Cli({"submit", spec, "--follow"});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const std::string id = JobIdFrom(submit.output);
  const v1::Job job = cluster_->GetJob(id);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.reason();

  const google::protobuf::Struct run = Check("fashion mnist", id);
  ASSERT_EQ(At(run, "runs").number_value(), 1) << "one run per job";
  EXPECT_EQ(At(run, "status").string_value(), "FINISHED");
  EXPECT_EQ(At(run, "name").string_value(), "tracked-mlp (" + id + ")");
  const auto& params = At(run, "params").struct_value();
  EXPECT_EQ(At(params, "model.type").string_value(), "mlp");
  EXPECT_EQ(At(params, "optimizer.lr").string_value(), "0.003");
  EXPECT_EQ(At(params, "training.epochs").string_value(), "2");
  // Every logged step (64 steps, a train metric every 8) and the last eval.
  std::vector<double> steps;
  for (const auto& v : At(run, "loss_steps").list_value().values()) {
    steps.push_back(v.number_value());
  }
  EXPECT_THAT(steps, ::testing::ElementsAre(8, 16, 24, 32, 40, 48, 56, 64));
  const auto& metrics = At(run, "metrics").struct_value();
  EXPECT_DOUBLE_EQ(At(metrics, "eval/eval_accuracy").number_value(),
                   job.latest_eval().values().at("eval_accuracy"));
  // The model, as trainctl export writes it.
  const auto& meta = At(run, "model_metadata").struct_value();
  EXPECT_EQ(At(meta, "trainctl.job_id").string_value(), id);
  EXPECT_EQ(At(meta, "trainctl.step").string_value(), "64");
  EXPECT_THAT(At(meta, "trainctl.model").string_value(), HasSubstr("\"type\":\"mlp\""));
  std::vector<std::string> tensors;
  for (const auto& v : At(run, "model_tensors").list_value().values()) {
    tensors.push_back(v.string_value());
  }
  EXPECT_THAT(tensors, ::testing::ElementsAre("fc0.bias", "fc0.weight", "head.bias",
                                              "head.weight"));
}

TEST_F(MlflowTest, AServerRankZeroCannotReachFailsTheJobNamingIt) {
  const std::string spec = cluster_->WriteFile(
      "unreachable.yaml",
      "name: untracked\nmodel: {type: mlp, hidden: [8]}\n"
      "data: {train_images: " + kData + "train-images-idx3-ubyte.gz, train_labels: " + kData +
          "train-labels-idx1-ubyte.gz, train_limit: 256}\n"
      "training: {epochs: 1, batch_size: 64}\n"
      "fault_tolerance: {max_restarts: 0}\n"
      "tracking: {mlflow: 'http://127.0.0.1:1'}\n");
  CliResult submit = cluster_->Cli({"submit", spec, "--follow"});
  EXPECT_EQ(submit.exit_code, 1) << submit.output;
  const v1::Job job = cluster_->GetJob(JobIdFrom(submit.output));
  EXPECT_EQ(job.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(job.reason(), HasSubstr("tracking.mlflow: GET http://127.0.0.1:1/api/2.0/mlflow/"
                                      "experiments/get-by-name"));
}

}  // namespace
}  // namespace trainctl::testing
