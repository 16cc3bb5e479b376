// A non-admin user against a real TLS cluster, through the real CLI and
// gRPC (issue #15): what the outside audit did, and what must stop it.
// A data file's bytes never reach the user (not even the join token's), a
// configuration error fails a job at once, a dry run opens no file on the
// coordinator, TorchScript follows the operator's policy, and a worker
// cannot claim more slots than it joined with.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <signal.h>

#include <chrono>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>

#include "local_cluster.h"

namespace trainctl::testing {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;
using ::testing::Not;

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class HostileUsersTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ClusterOptions options;
    options.coordinator_flags = {"--torchscript", "admins"};
    cluster_ = new LocalCluster(/*workers=*/1, /*slots=*/1, /*cpus=*/1, options);
    mallory_ = AddUser("mallory");
  }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }

  static std::string AddUser(const std::string& name) {
    const std::string out = cluster_->dir() + "/add-user-" + name;
    Process add({std::string(TRAINCTL_BIN_DIR) + "/trainctl-coordinator",
                 "add-user", name, "--state-dir", cluster_->state_dir()},
                out);
    EXPECT_EQ(add.Wait(seconds(30)), 0) << Slurp(out);
    const std::string text = Slurp(out);
    const size_t at = text.find("tcu_");
    return at == std::string::npos ? "" : text.substr(at, 4 + 64);
  }

  // The CLI as mallory.
  static CliResult AsMallory(const std::vector<std::string>& args,
                             seconds timeout = seconds(120)) {
    static int n = 0;
    std::vector<std::string> argv{std::string(TRAINCTL_BIN_DIR) + "/trainctl"};
    for (const std::string& f : cluster_->CliFlags(mallory_)) argv.push_back(f);
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string log = cluster_->dir() + "/mallory-" + std::to_string(++n);
    Process cli(argv, log);
    CliResult result;
    result.exit_code = cli.Wait(timeout);
    result.output = Slurp(log);
    return result;
  }

  static LocalCluster* cluster_;
  static std::string mallory_;
};

LocalCluster* HostileUsersTest::cluster_ = nullptr;
std::string HostileUsersTest::mallory_;

// The audit's first finding: a csv header error quoted the join token.
TEST_F(HostileUsersTest, ACsvErrorOnTheJoinTokenFileShowsNoByteOfIt) {
  const std::string token_file = cluster_->state_dir() + "/auth/join.token";
  const std::string spec = cluster_->WriteFile(
      "leak.yaml",
      "name: leak\nmodel: mlp\n"
      "fault_tolerance: {max_restarts: 3}\n"
      "data: {format: csv, header: true, label_column: nope, delimiter: \"_\","
      " train_path: " + token_file + "}\n");
  CliResult submit = AsMallory({"submit", spec});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const size_t at = submit.output.find("job-");
  ASSERT_NE(at, std::string::npos) << submit.output;
  const std::string id = submit.output.substr(
      at, submit.output.find_first_not_of("job-0123456789", at) - at);
  v1::Job done = cluster_->WaitForJob(
      id,
      [](const v1::Job& j) {
        return j.state() == v1::JOB_STATE_FAILED ||
               j.state() == v1::JOB_STATE_SUCCEEDED;
      },
      seconds(120));
  EXPECT_EQ(done.state(), v1::JOB_STATE_FAILED);
  // A data error is not retried: restarts would fail the same way.
  EXPECT_EQ(done.restarts(), 0) << done.reason();
  EXPECT_THAT(done.reason(), HasSubstr("no column named 'nope'"));
  EXPECT_THAT(done.reason(), HasSubstr("not retried"));
  const std::string secret = cluster_->join_token().substr(7);  // after tcjoin_
  ASSERT_GE(secret.size(), 16u);
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"status", id},
        std::vector<std::string>{"status", id, "--output", "json"},
        std::vector<std::string>{"logs", id}}) {
    CliResult shown = AsMallory(args);
    EXPECT_THAT(shown.output, Not(HasSubstr(secret.substr(0, 8))))
        << args[0] << " shows bytes of the join token:\n" << shown.output;
  }
  EXPECT_THAT(Slurp(cluster_->dir() + "/coordinator.log"),
              Not(HasSubstr(secret.substr(0, 8))));
}

// A dry run used to read /dev/zero on the coordinator until it ran out of
// memory; now a worker checks the data, and refuses what is not a file.
TEST_F(HostileUsersTest, ADryRunOpensNothingOnTheCoordinator) {
  const std::string spec = cluster_->WriteFile(
      "zero.yaml", "name: z\nmodel: mlp\n"
                   "data: {format: csv, train_path: /dev/zero}\n");
  CliResult dry = AsMallory({"submit", "--dry-run", spec}, seconds(60));
  EXPECT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_THAT(dry.output, HasSubstr("data.train_path"));
  EXPECT_THAT(dry.output, HasSubstr("regular file"));
  // The coordinator is alive and answers.
  EXPECT_EQ(AsMallory({"list"}).exit_code, 0);
}

TEST_F(HostileUsersTest, TorchScriptIsForAdminsOnlyWhenTheOperatorSaysSo) {
  const std::string spec = cluster_->WriteFile(
      "ts.yaml", "name: ts\nmodel: {type: torchscript, path: /tmp/x.pt}\n"
                 "data: {train_images: /a, train_labels: /b}\n");
  CliResult refused = AsMallory({"submit", spec});
  EXPECT_EQ(refused.exit_code, 5) << refused.output;  // denied
  EXPECT_THAT(refused.output, HasSubstr("model.type"));
  EXPECT_THAT(refused.output, HasSubstr("admins"));
  CliResult admin = cluster_->Cli({"submit", "--dry-run", spec});
  EXPECT_EQ(admin.exit_code, 0) << admin.output;
}

TEST_F(HostileUsersTest, ACancelReasonAndSpecStringsAreBounded) {
  const std::string spec = cluster_->WriteFile(
      "long.yaml", "name: long\nmodel: mlp\ndata: {train_images: /" +
                       std::string(5000, 'a') + ", train_labels: /b}\n");
  CliResult refused = AsMallory({"submit", spec});
  EXPECT_EQ(refused.exit_code, 2) << refused.output;
  EXPECT_THAT(refused.output, HasSubstr("data.train_images: is 5001 bytes"));
}

// A node joined with 1 slot cannot come back claiming 8 (the scheduler
// would then prefer it for every job), nor anyone join with a million.
TEST_F(HostileUsersTest, AWorkerCannotClaimMoreSlotsThanItJoinedWith) {
  Process& greedy = cluster_->StartWorker("greedy", 1, 1);
  ASSERT_TRUE(cluster_->WaitForWorkers(2, seconds(60)));
  greedy.Signal(SIGTERM);
  greedy.Wait(seconds(30));
  const std::string log = cluster_->dir() + "/greedy-again.log";
  Process again({std::string(TRAINCTL_BIN_DIR) + "/trainctl-worker",
                 "--coordinator", cluster_->address(), "--name", "greedy",
                 "--slots", "8", "--state-dir",
                 cluster_->dir() + "/greedy-state", "--ca-cert",
                 cluster_->ca_cert_path()},
                log);
  const auto deadline = std::chrono::steady_clock::now() + seconds(60);
  while (Slurp(log).find("joined with") == std::string::npos &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_THAT(Slurp(log), HasSubstr("register.slots 8 is more than the 1 "
                                    "slots worker 'greedy' joined with"));
  again.Signal(SIGTERM);
  again.Wait(seconds(30));

  const std::string huge_log = cluster_->dir() + "/huge.log";
  Process huge({std::string(TRAINCTL_BIN_DIR) + "/trainctl-worker",
                "--coordinator", cluster_->address(), "--name", "huge",
                "--slots", "1000000", "--state-dir",
                cluster_->dir() + "/huge-state", "--ca-cert",
                cluster_->ca_cert_path(), "--join-token",
                cluster_->join_token()},
               huge_log);
  EXPECT_NE(huge.Wait(seconds(60)), 0);  // the worker itself says no first
  EXPECT_THAT(Slurp(huge_log), HasSubstr("--slots"));
}

}  // namespace
}  // namespace trainctl::testing
