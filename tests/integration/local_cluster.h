#pragma once

// Test harness: a coordinator and N workers as real processes on loopback,
// the coordinator on an ephemeral port read back from --port-file. Every wait
// is bounded. Everything started is killed when the cluster is destroyed.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/security/credentials.h>
#include <gtest/gtest.h>

#include "tests/common/scoped_temp_dir.h"
#include "trainctl/v1/jobs.grpc.pb.h"

namespace trainctl::testing {

// A child process whose stdout and stderr go to one file.
class Process {
 public:
  Process(const std::vector<std::string>& argv, const std::string& log_path);
  ~Process();
  pid_t pid() const { return pid_; }
  void Signal(int sig);
  // Exit code (-N for signal N), or nullopt-like -1000 on timeout.
  int Wait(std::chrono::milliseconds timeout);
  bool Running();

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
};

struct CliResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

struct ClusterOptions {
  // The coordinator's --state-dir; empty: a fresh one in the cluster's dir.
  std::string state_dir;
  // Appended to the coordinator's command line on every start.
  std::vector<std::string> coordinator_flags;
  // Plaintext and no authentication (--insecure on every program). Without
  // it the cluster runs as deployed: TLS, workers joining with the join
  // token, and the CLI and stubs using the admin token.
  bool insecure = false;
};

class LocalCluster {
 public:
  // Starts a coordinator and `workers` workers named w1.. with
  // `slots` slots and `cpus` cores each. Fails the current test on error.
  LocalCluster(int workers, int slots, int cpus, ClusterOptions options = {});
  ~LocalCluster();

  const std::string& state_dir() const { return options_.state_dir; }
  // SIGKILLs the coordinator (no shutdown of any kind) and reaps it.
  void KillCoordinator();
  // SIGTERMs the coordinator (a graceful shutdown that flushes its store)
  // and reaps it.
  void StopCoordinator();
  // SIGKILLs worker `index` (0-based; named w<index+1>); its ranks die with
  // it (PR_SET_PDEATHSIG).
  void KillWorker(int index);
  // Starts the coordinator again on the same port and state dir (its log is
  // coordinator-N.log); true once it serves. Workers reconnect by themselves.
  bool RestartCoordinator();

  const std::string& address() const { return address_; }
  pid_t coordinator_pid() const { return coordinator_ ? coordinator_->pid() : -1; }
  // The cluster CA and tokens the coordinator made (empty when insecure).
  const std::string& ca_cert_path() const { return ca_cert_path_; }
  const std::string& admin_token() const { return admin_token_; }
  const std::string& join_token() const { return join_token_; }
  // Channel credentials for this cluster: TLS with `token` (none when
  // empty), or plaintext when insecure.
  std::shared_ptr<grpc::ChannelCredentials> Credentials(
      const std::string& token) const;
  // The flags that make the trainctl CLI reach this cluster as `token`.
  std::vector<std::string> CliFlags(const std::string& token) const;
  // Starts one more worker named `name` with `extra` flags (e.g. without a
  // join token); its log is <name>.log. Does not wait for registration.
  // `launcher` runs it (e.g. unshare, for a node with its own mounts): the
  // worker's command line is appended to it.
  Process& StartWorker(const std::string& name, int slots, int cpus,
                       const std::vector<std::string>& extra = {},
                       bool with_credentials = true,
                       const std::vector<std::string>& launcher = {});
  const std::string& dir() const { return dir_; }
  v1::Jobs::Stub& jobs() { return *stub_; }

  // The command line that runs trainctl with `args` against this cluster
  // (or against `coordinator` when given): the one place that says how the
  // CLI reaches a coordinator. As the admin unless `token` is given.
  std::vector<std::string> CliArgv(const std::vector<std::string>& args,
                                   const std::string& coordinator = "",
                                   const std::string& token = "") const;
  // Runs the trainctl CLI against this cluster (as the admin).
  CliResult Cli(const std::vector<std::string>& args,
                std::chrono::seconds timeout = std::chrono::seconds(120));
  // The same with the identity of `token` (AddUser's).
  CliResult CliAs(const std::string& token, const std::vector<std::string>& args,
                  std::chrono::seconds timeout = std::chrono::seconds(120));
  // Starts the trainctl CLI against this cluster without waiting; its
  // stdout and stderr go to log_path.
  std::unique_ptr<Process> CliInBackground(const std::vector<std::string>& args,
                                           const std::string& log_path);
  // Writes `text` to a file in the cluster's directory; returns its path.
  std::string WriteFile(const std::string& name, const std::string& text);
  v1::Job GetJob(const std::string& id);
  // Submits `spec` over gRPC; fails the current test if it is refused.
  v1::Job Submit(const std::string& spec);
  // Polls GetJob until `done` holds or the timeout passes; returns the last.
  v1::Job WaitForJob(const std::string& id,
                     const std::function<bool(const v1::Job&)>& done,
                     std::chrono::seconds timeout);
  // Every event of the job, replayed from the start (job must be final).
  std::vector<v1::JobEvent> Events(const std::string& id);
  // The events of a job that may not be final: what a watcher is shown
  // within `wait`.
  std::vector<v1::JobEvent> EventsSoFar(const std::string& id,
                                        std::chrono::milliseconds wait);
  // `trainctl-coordinator add-user NAME` on the state directory: the new
  // person's token (empty, with a test failure, when it did not work).
  std::string AddUser(const std::string& name);
  // Blocks until `count` workers are registered (bounded).
  bool WaitForWorkers(int count, std::chrono::seconds timeout);
  // WatchJob with follow = false: what the job has published now, ended
  // by the server (`wait` bounds a server that would follow instead).
  std::vector<v1::JobEvent> PublishedEvents(const std::string& id,
                                            std::chrono::milliseconds wait,
                                            grpc::Status* status) {
    return ReadEvents(id, wait, status, /*follow=*/false);
  }

 private:
  // WatchJob from seq 1 until it ends or `wait` passes.
  // `follow` false: only what is published now (WatchJobRequest.follow).
  std::vector<v1::JobEvent> ReadEvents(const std::string& id,
                                       std::chrono::milliseconds wait,
                                       grpc::Status* status,
                                       bool follow = true);
  // Starts the coordinator listening on `listen`; sets address_ and stub_.
  bool StartCoordinator(const std::string& listen);

  // First, so it is removed last: after every process has stopped.
  ScopedTempDir temp_dir_{"trainctl-test"};
  ClusterOptions options_;
  int coordinator_starts_ = 0;
  std::string dir_ = temp_dir_.path();
  std::string address_;
  std::unique_ptr<Process> coordinator_;
  std::vector<std::unique_ptr<Process>> workers_;
  std::unique_ptr<v1::Jobs::Stub> stub_;
  std::string ca_cert_path_, admin_token_, join_token_;
};

// A suite whose tests share one cluster of two 1-slot, 1-core workers,
// started before its first test and stopped after its last.
class SharedClusterTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { cluster_ = new LocalCluster(2, 1, 1); }
  static void TearDownTestSuite() {
    delete cluster_;
    cluster_ = nullptr;
  }
  static LocalCluster* cluster_;
};

// PIDs of live processes whose command line contains every one of `parts`.
std::vector<pid_t> FindProcesses(const std::vector<std::string>& parts);

// The job id ("job-N") printed by `trainctl submit`, or "" if none.
std::string JobIdFrom(const std::string& output);

// The data section for Fashion-MNIST (Debian's dataset-fashion-mnist):
// train_limit training samples, 1000 for evaluation.
std::string FashionMnistData(int64_t train_limit);

// Spec for a small Fashion-MNIST MLP job; `extra` is appended verbatim.
std::string SmallJobSpec(int ranks, int64_t train_limit, int epochs,
                         const std::string& extra = "");

}  // namespace trainctl::testing
