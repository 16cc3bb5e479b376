// A non-admin user against a real TLS cluster, through the real CLI and
// gRPC (issue #15): what the outside audit did, and what must stop it.
// A data file's bytes never reach the user (not even the join token's), a
// configuration error fails a job at once, a dry run opens no file on the
// coordinator, TorchScript follows the operator's policy, and a worker
// cannot claim more slots than it joined with.

#include <gmock/gmock.h>
#include <grpcpp/create_channel.h>
#include <gtest/gtest.h>

#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <thread>

#include "common/pki.h"
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
    return cluster_->AddUser(name);
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
  const std::string id = JobIdFrom(submit.output);
  ASSERT_FALSE(id.empty()) << submit.output;
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

  // A cancel reason is kept in the job, its events and sent to its agents.
  const std::string held = cluster_->WriteFile(
      "held.yaml", "name: held\nranks: 64\nmodel: mlp\n"
                   "data: {train_images: /a, train_labels: /b}\n");
  CliResult submit = AsMallory({"submit", held});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const std::string id = JobIdFrom(submit.output);
  ASSERT_FALSE(id.empty()) << submit.output;
  CliResult long_reason =
      AsMallory({"cancel", id, "--reason", std::string(2000, 'r')});
  EXPECT_NE(long_reason.exit_code, 0) << long_reason.output;
  EXPECT_THAT(long_reason.output, HasSubstr("reason: 2000 bytes; at most 1024"));
  CliResult escape = AsMallory({"cancel", id, "--reason", "\x1b]0;pwned\x07"});
  EXPECT_NE(escape.exit_code, 0) << escape.output;
  EXPECT_THAT(escape.output, HasSubstr("reason: must not contain control"));
  CliResult plain = AsMallory({"cancel", id, "--reason", "not needed"});
  EXPECT_EQ(plain.exit_code, 0) << plain.output;
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

// A revoked token ended no open stream: `watch` went on for ever.
TEST_F(HostileUsersTest, RevokingATokenEndsItsOpenWatch) {
  const std::string eve = AddUser("eve");
  auto jobs = v1::Jobs::NewStub(
      grpc::CreateChannel(cluster_->address(), cluster_->Credentials(eve)));
  // A job that never fits stays queued: its watch stays open.
  grpc::ClientContext submit_ctx;
  submit_ctx.set_deadline(std::chrono::system_clock::now() + seconds(30));
  v1::SubmitJobRequest submit;
  submit.set_spec_text(
      "name: wide\nranks: 64\nmodel: mlp\n"
      "data: {train_images: /a, train_labels: /b}\n"
      "training: {batch_size: 64}\n");
  v1::SubmitJobResponse submitted;
  ASSERT_TRUE(jobs->SubmitJob(&submit_ctx, submit, &submitted).ok());
  grpc::ClientContext watch_ctx;
  watch_ctx.set_deadline(std::chrono::system_clock::now() + seconds(60));
  v1::WatchJobRequest watch;
  watch.set_job_id(submitted.job().id());
  auto reader = jobs->WatchJob(&watch_ctx, watch);
  v1::JobEvent first;
  ASSERT_TRUE(reader->Read(&first));  // the stream is open and serving

  // Revoke: eve's line leaves auth/tokens (as an admin would edit it).
  const std::string tokens = cluster_->state_dir() + "/auth/tokens";
  std::string kept;
  std::istringstream lines(Slurp(tokens));
  for (std::string line; std::getline(lines, line);) {
    if (line.find(" eve") == std::string::npos) kept += line + "\n";
  }
  ASSERT_NE(kept, Slurp(tokens));
  {
    std::ofstream(tokens + ".new") << kept;
  }
  ASSERT_EQ(rename((tokens + ".new").c_str(), tokens.c_str()), 0);

  v1::JobEvent more;
  while (reader->Read(&more)) {}
  const grpc::Status ended = reader->Finish();
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::UNAUTHENTICATED)
      << ended.error_message();
  cluster_->Cli({"cancel", submitted.job().id()});
}

// Renewal made a new key, which the coordinator (pinning each name to the
// key it first certified) refused: every worker fell out at expiry.
TEST_F(HostileUsersTest, ACertificateAboutToExpireIsRenewedWithTheSameKey) {
  Process& first = cluster_->StartWorker("renew", 1, 1);
  const std::string state = cluster_->dir() + "/renew-state";
  const auto joined = std::chrono::steady_clock::now() + seconds(60);
  while (Slurp(state + "/worker.crt").empty() &&
         std::chrono::steady_clock::now() < joined) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  first.Signal(SIGTERM);
  first.Wait(seconds(30));
  const std::string key = Slurp(state + "/worker.key");
  ASSERT_FALSE(key.empty());
  // Its certificate now expires in 5 days: within the 30 days of renewal.
  pki::CertificateOrder order;
  order.common_name = "renew";
  order.usage = pki::Usage::kClient;
  order.valid_days = 5;
  absl::StatusOr<std::string> short_lived = pki::IssueCertificate(
      Slurp(cluster_->state_dir() + "/tls/ca.crt"),
      Slurp(cluster_->state_dir() + "/tls/ca.key"), key, order);
  ASSERT_TRUE(short_lived.ok()) << short_lived.status();
  {
    std::ofstream(state + "/worker.crt") << *short_lived;
  }
  Process& again = cluster_->StartWorker("renew", 1, 1);
  const auto renewed = std::chrono::steady_clock::now() + seconds(60);
  while (Slurp(state + "/worker.crt") == *short_lived &&
         std::chrono::steady_clock::now() < renewed && again.Running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(again.Running()) << Slurp(cluster_->dir() + "/renew.log");
  EXPECT_EQ(Slurp(state + "/worker.key"), key);
  absl::StatusOr<pki::CertificateInfo> info =
      pki::ReadCertificate(Slurp(state + "/worker.crt"));
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_GT(info->not_after_unix, time(nullptr) + 365 * 24 * 3600);
  again.Signal(SIGTERM);
  again.Wait(seconds(30));
}

// The deployments' join step: the certificate is obtained by a separate
// run, and the agent that follows never holds the join token.
TEST_F(HostileUsersTest, AJoinStepLetsTheAgentRunWithoutTheToken) {
  const std::string state = cluster_->dir() + "/separate-state";
  const std::string log = cluster_->dir() + "/separate-join.log";
  Process join({std::string(TRAINCTL_BIN_DIR) + "/trainctl-worker",
                "--join-only", "--coordinator", cluster_->address(), "--name",
                "separate", "--slots", "1", "--state-dir", state, "--ca-cert",
                cluster_->ca_cert_path(), "--join-token",
                cluster_->join_token()},
               log);
  ASSERT_EQ(join.Wait(seconds(60)), 0) << Slurp(log);
  EXPECT_FALSE(Slurp(state + "/worker.crt").empty());
  Process& agent = cluster_->StartWorker(
      "separate", 1, 1, {"--ca-cert", cluster_->ca_cert_path()},
      /*with_credentials=*/false);
  const auto deadline = std::chrono::steady_clock::now() + seconds(60);
  while (Slurp(cluster_->dir() + "/separate.log").find("registered with") ==
             std::string::npos &&
         std::chrono::steady_clock::now() < deadline && agent.Running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_THAT(Slurp(cluster_->dir() + "/separate.log"),
              HasSubstr("registered with"));
  agent.Signal(SIGTERM);
  agent.Wait(seconds(30));
}

// A root worker without --rank-user ran every job's code as root (it only
// warned). Now it refuses to start, naming both ways out; either one lets
// it start.
TEST_F(HostileUsersTest, ARootWorkerDoesNotRunJobCodeAsRootByDefault) {
  if (geteuid() != 0) GTEST_SKIP() << "the check is for a worker run as root";
  // ctest lets the suite's root workers run root ranks; this one may not.
  const char* allowed = getenv("TRAINCTL_ALLOW_ROOT_RANKS");
  const std::string saved = allowed != nullptr ? allowed : "";
  unsetenv("TRAINCTL_ALLOW_ROOT_RANKS");
  auto start = [&](const std::string& name,
                   std::vector<std::string> extra) {
    std::vector<std::string> argv{
        std::string(TRAINCTL_BIN_DIR) + "/trainctl-worker", "--coordinator",
        cluster_->address(), "--name", name, "--slots", "1", "--state-dir",
        cluster_->dir() + "/" + name + "-state", "--ca-cert",
        cluster_->ca_cert_path(), "--join-token", cluster_->join_token()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return std::make_unique<Process>(argv, cluster_->dir() + "/" + name + ".log");
  };
  auto registered = [&](const std::string& name, Process& agent) {
    const std::string log = cluster_->dir() + "/" + name + ".log";
    const auto deadline = std::chrono::steady_clock::now() + seconds(60);
    while (Slurp(log).find("registered with") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline && agent.Running()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const bool ok = Slurp(log).find("registered with") != std::string::npos;
    agent.Signal(SIGTERM);
    agent.Wait(seconds(30));
    return ok;
  };
  std::unique_ptr<Process> refused = start("rooted", {});
  EXPECT_EQ(refused->Wait(seconds(60)), 2);
  const std::string said = Slurp(cluster_->dir() + "/rooted.log");
  EXPECT_THAT(said, HasSubstr("every job's code would run as root"));
  EXPECT_THAT(said, HasSubstr("--rank-user USER"));
  EXPECT_THAT(said, HasSubstr("--allow-root-ranks"));
  EXPECT_EQ(Slurp(cluster_->dir() + "/rooted-state/worker.crt"), "")
      << "it joined before refusing";

  std::unique_ptr<Process> unprivileged =
      start("unprivileged", {"--rank-user", "nobody"});
  EXPECT_TRUE(registered("unprivileged", *unprivileged));
  // Its ranks write the data cache: it is nobody's, reachable through the
  // state directory (0711), whose key stays the agent's.
  const std::string state = cluster_->dir() + "/unprivileged-state";
  struct stat cache {}, dir {}, key {};
  ASSERT_EQ(stat((state + "/data-cache").c_str(), &cache), 0);
  ASSERT_EQ(stat(state.c_str(), &dir), 0);
  ASSERT_EQ(stat((state + "/worker.key").c_str(), &key), 0);
  const passwd* nobody = getpwnam("nobody");
  ASSERT_NE(nobody, nullptr);
  EXPECT_EQ(cache.st_uid, nobody->pw_uid);
  EXPECT_EQ(dir.st_mode & 0777, 0711u);
  EXPECT_EQ(key.st_uid, 0u);
  EXPECT_EQ(key.st_mode & 0077, 0u);
  std::unique_ptr<Process> accepted =
      start("accepted", {"--allow-root-ranks"});
  EXPECT_TRUE(registered("accepted", *accepted));
  if (allowed != nullptr) setenv("TRAINCTL_ALLOW_ROOT_RANKS", saved.c_str(), 1);
}

}  // namespace
}  // namespace trainctl::testing
