// trainctl-coordinator: parses flags and runs CoordinatorServer until
// SIGINT or SIGTERM.

#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <map>

#include <CLI/CLI.hpp>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/log.h"
#include "common/stop_signals.h"
#include "coordinator/auth/cluster_files.h"
#include "coordinator/auth/worker_enrollment.h"
#include "coordinator/coordinator_server.h"
#include "coordinator/scheduling_config.h"

// Set by CMake (cmake/trainctl_build_info.cmake); a build without them says
// so instead of guessing.
#ifndef TRAINCTL_GRPC_VERSION
#define TRAINCTL_GRPC_VERSION "unknown"
#endif
#ifndef TRAINCTL_PROTOBUF_VERSION
#define TRAINCTL_PROTOBUF_VERSION "unknown"
#endif

namespace {

// What --version prints: this build and the libraries it was compiled with.
constexpr char kVersionText[] =
    "trainctl-coordinator " TRAINCTL_VERSION
    "\n"
    "  gRPC " TRAINCTL_GRPC_VERSION
    "\n"
    "  Protobuf " TRAINCTL_PROTOBUF_VERSION
    "\n"
    "  LibTorch, CUDA, NCCL: not linked (only trainctl-worker trains; see "
    "`trainctl-worker --version`)";

// Writes `port` to `path` (nothing when empty); write then rename, so a
// reader never sees a half-written port. False (after saying why) on error.
bool WritePortFile(const char* flag, const std::string& path, int port) {
  if (path.empty()) return true;
  const std::string tmp = path + ".tmp";
  std::ofstream(tmp) << port << "\n";
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    fprintf(stderr, "trainctl-coordinator: cannot write %s %s\n", flag,
            path.c_str());
    return false;
  }
  return true;
}

int RunInit(const trainctl::coordinator::CoordinatorOptions& options) {
  namespace auth = trainctl::coordinator::auth;
  absl::StatusOr<auth::InitReport> report =
      auth::InitCluster(options.state_dir, options.server_names);
  if (!report.ok()) {
    fprintf(stderr, "trainctl-coordinator init: %s\n",
            std::string(report.status().message()).c_str());
    return 1;
  }
  for (const std::string& path : report->created) {
    printf("created %s\n", path.c_str());
  }
  if (report->created.empty()) printf("nothing to do: every file exists\n");
  auth::ClusterFiles files(options.state_dir);
  printf("\nCA certificate (give it to workers and users): %s\n"
         "admin token (trainctl login --token ...):      %s\n"
         "worker join token (trainctl-worker --join-token ...): %s\n",
         files.ca_cert.c_str(), files.admin_token.c_str(),
         files.join_token.c_str());
  return 0;
}

int RunAddUser(const std::string& state_dir, const std::string& name,
               bool admin, bool join, const std::string& expires_in) {
  namespace auth = trainctl::coordinator::auth;
  const auth::TokenRole role = join    ? auth::TokenRole::kJoin
                               : admin ? auth::TokenRole::kAdmin
                                       : auth::TokenRole::kUser;
  int64_t expires = 0;
  if (!expires_in.empty()) {
    absl::StatusOr<int64_t> lifetime =
        auth::ParseTokenLifetime("--expires-in", expires_in);
    if (!lifetime.ok()) {
      fprintf(stderr, "trainctl-coordinator add-user: %s\n",
              std::string(lifetime.status().message()).c_str());
      return 2;
    }
    expires = static_cast<int64_t>(std::time(nullptr)) + *lifetime;
  }
  absl::StatusOr<std::string> token =
      auth::AddToken(state_dir, role, name, expires);
  if (!token.ok()) {
    fprintf(stderr, "trainctl-coordinator add-user: %s\n",
            std::string(token.status().message()).c_str());
    return 1;
  }
  // The only place the token is ever shown; the file keeps its digest.
  printf("%s\n", token->c_str());
  fprintf(stderr, "%s token for %s added to %s (shown once; a running "
          "coordinator picks it up at once)%s\n",
          auth::TokenRoleName(role), name.c_str(),
          auth::ClusterFiles(state_dir).tokens.c_str(),
          expires > 0 ? absl::StrCat("; it expires in ", expires_in).c_str()
                      : "");
  return 0;
}

int RunCheckScheduling(const std::string& path) {
  absl::StatusOr<trainctl::coordinator::SchedulingConfig> config =
      trainctl::coordinator::LoadSchedulingConfig(path);
  if (!config.ok()) {
    fprintf(stderr, "trainctl-coordinator check-scheduling: %s\n",
            std::string(config.status().message()).c_str());
    return 1;
  }
  std::string classes;
  for (const auto& c : config->classes) {
    absl::StrAppend(&classes, classes.empty() ? "" : ", ", c.name, " ", c.value,
                    c.name == config->default_class ? " (default)" : "");
  }
  printf("%s: ok\n  classes: %s\n  %zu user and %zu group quotas, %zu users "
         "in groups, fair-share half-life %gh, backfill %s\n",
         path.c_str(), classes.c_str(), config->user_quotas.size(),
         config->group_quotas.size(), config->group_of_user.size(),
         config->half_life_hours, config->backfill ? "on" : "off");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil is built with deadlock detection on, so every lock of
  // gRPC's own absl::Mutex also updated a process-wide lock graph: 4% of
  // the coordinator's CPU samples at 1,000 agents (docs/performance.md).
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  trainctl::coordinator::CoordinatorOptions options;
  options.state_dir = trainctl::coordinator::DefaultStateDir();
  options.version = TRAINCTL_VERSION;
  options.grpc_version = TRAINCTL_GRPC_VERSION;
  options.protobuf_version = TRAINCTL_PROTOBUF_VERSION;
  std::string port_file;
  std::string http_port_file;
  CLI::App app{"trainctl-coordinator: queues training jobs, assigns ranks to "
               "workers, serves rendezvous and streams metrics."};
  app.set_version_flag("--version", kVersionText);
  app.footer(
      "\nServes trainctl.v1.{Jobs,Workers,Rendezvous} and grpc.health.v1.Health "
      "(and gRPC reflection with --reflection) on --listen; with "
      "--http-listen, Prometheus "
      "/metrics, /healthz and a web dashboard (docs/observability.md).");
  app.add_option("--listen", options.listen,
                 "HOST:PORT to serve gRPC on; port 0 picks a free port")
      ->capture_default_str();
  app.add_option("--port-file", port_file,
                 "write the bound port to this file once serving");
  app.add_option("--http-listen", options.http_listen,
                 "HOST:PORT to serve /metrics, /healthz and the dashboard on "
                 "(HTTPS with the gRPC port's certificate, bearer tokens for "
                 "everything but /healthz; plain HTTP with --insecure); port "
                 "0 picks a free port; empty (the default) serves no HTTP")
      ->capture_default_str();
  app.add_option("--http-port-file", http_port_file,
                 "write the bound HTTP port to this file once serving");
  app.add_option("--lease-ms", options.lease_ms,
                 "a worker silent this long is declared lost")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{100}, int64_t{3'600'000}));
  app.add_option("--heartbeat-ms", options.heartbeat_interval_ms,
                 "heartbeat interval asked of every worker")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{10}, int64_t{600'000}));
  app.add_option("--state-dir", options.state_dir,
                 "directory of the job database and the cluster's CA, "
                 "certificates and tokens (created 0700 if missing); jobs "
                 "survive restarts through it")
      ->capture_default_str();
  app.add_flag("--insecure", options.insecure,
               "plaintext gRPC and HTTP and no authentication (everyone is "
               "an admin); for a demo on loopback only. Without it, every "
               "port uses TLS and every call is authenticated");
  using trainctl::coordinator::TorchScriptPolicy;
  const std::map<std::string, TorchScriptPolicy> torchscript_policies = {
      {"allow", TorchScriptPolicy::kAllow},
      {"admins", TorchScriptPolicy::kAdmins},
      {"refuse", TorchScriptPolicy::kRefuse}};
  std::string torchscript = "allow";
  app.add_option("--torchscript", torchscript,
                 "who may submit model type torchscript, whose model is code "
                 "that runs as the worker's user: allow (everyone), admins, "
                 "refuse")
      ->capture_default_str()
      ->check(CLI::IsMember({"allow", "admins", "refuse"}));
  app.add_option("--keep-finished-jobs", options.keep_finished_jobs,
                 "finished jobs kept; past it, the oldest of the user with "
                 "the most are deleted (0: no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--keep-finished-days", options.keep_finished_days,
                 "days a finished job is kept (0: no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  int64_t max_file_mb = options.max_file_bytes >> 20;
  app.add_option("--max-file-mb", max_file_mb,
                 "largest file a job may ship from its submitter's machine "
                 "(a relative path in its spec), kept in --state-dir/files "
                 "while a job names it")
      ->capture_default_str()
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  app.add_option("--scheduling", options.scheduling_file,
                 "YAML file of priority classes, per-user and per-group "
                 "quotas and the fair-share half-life (docs/scheduling.md); "
                 "read again on SIGHUP. Without it: one class, no quotas")
      ->check(CLI::ExistingFile);
  app.add_flag("--reflection", options.reflection,
               "serve gRPC server reflection (for grpcurl); it answers "
               "without a token");
  app.add_option("--san", options.server_names,
                 "a host name or IP address clients use to reach this "
                 "coordinator, for the server certificate made on the first "
                 "start or by init (repeatable; localhost, 127.0.0.1, ::1, "
                 "this host's name and the --listen host are always in)");
  app.fallthrough();
  CLI::App* init = app.add_subcommand(
      "init", "create the cluster CA, the server certificate, an admin token "
              "and a worker join token in --state-dir (kept if present), then "
              "exit");
  std::string user_name;
  bool user_admin = false;
  bool user_join = false;
  CLI::App* add_user = app.add_subcommand(
      "add-user", "add a token for a user to --state-dir, print it once and "
                  "exit");
  add_user->add_option("name", user_name, "the user's name")->required();
  add_user->add_flag("--admin", user_admin,
                     "may read and cancel every user's jobs");
  add_user->add_flag("--join", user_join,
                     "a worker join token instead of a user token");
  std::string user_expires_in;
  add_user->add_option("--expires-in", user_expires_in,
                       "refuse the token after this long (90s, 30m, 2h, 7d): "
                       "e.g. a join token for one Slurm allocation");
  std::string forget_name;
  CLI::App* forget = app.add_subcommand(
      "forget-worker", "let worker NAME join again with a new key (a node "
                       "that lost its certificate), then exit");
  forget->add_option("name", forget_name, "the worker's name")->required();
  std::string check_file;
  CLI::App* check = app.add_subcommand(
      "check-scheduling", "check a --scheduling file (before a SIGHUP), print "
                          "what it defines or every problem, then exit");
  check->add_option("file", check_file, "the YAML file")->required();
  app.require_subcommand(0, 1);
  CLI11_PARSE(app, argc, argv);
  options.max_file_bytes = max_file_mb << 20;
  options.torchscript = torchscript_policies.at(torchscript);
  if (check->parsed()) return RunCheckScheduling(check_file);
  if (init->parsed() || add_user->parsed() || forget->parsed()) {
    if (options.state_dir.empty()) {
      fprintf(stderr, "trainctl-coordinator: --state-dir must not be empty\n");
      return 1;
    }
    if (forget->parsed()) {
      absl::Status s = trainctl::coordinator::auth::ForgetWorker(
          options.state_dir, forget_name);
      if (!s.ok()) {
        fprintf(stderr, "trainctl-coordinator forget-worker: %s\n",
                std::string(s.message()).c_str());
        return 1;
      }
      printf("worker %s may join again with a new key\n", forget_name.c_str());
      return 0;
    }
    return init->parsed() ? RunInit(options)
                          : RunAddUser(options.state_dir, user_name,
                                       user_admin, user_join, user_expires_in);
  }
  if (options.state_dir.empty()) {
    fprintf(stderr, "trainctl-coordinator: --state-dir must not be empty\n");
    return 1;
  }
  if (!http_port_file.empty() && options.http_listen.empty()) {
    fprintf(stderr, "trainctl-coordinator: --http-port-file needs --http-listen\n");
    return 1;
  }

  // Blocked in every thread from here; the main thread waits for them
  // (and for SIGHUP, which reloads the scheduling file).
  sigset_t stop_signals = trainctl::BlockStopSignals();
  sigaddset(&stop_signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  trainctl::RealClock clock;
  TLOG_INFO << "state database: "
            << trainctl::coordinator::StateDatabasePath(options.state_dir);
  absl::StatusOr<std::unique_ptr<trainctl::coordinator::CoordinatorServer>>
      created = trainctl::coordinator::CoordinatorServer::Create(options, clock);
  if (!created.ok()) {
    fprintf(stderr, "trainctl-coordinator: %s\n",
            std::string(created.status().message()).c_str());
    return 1;
  }
  trainctl::coordinator::CoordinatorServer& server = **created;
  absl::StatusOr<int> port = server.Start();
  if (!port.ok()) {
    fprintf(stderr, "trainctl-coordinator: %s\n",
            std::string(port.status().message()).c_str());
    return 1;
  }
  if (!WritePortFile("--port-file", port_file, *port)) return 1;
  if (!WritePortFile("--http-port-file", http_port_file, server.http_port())) {
    return 1;
  }
  int signal_number = 0;
  while ((signal_number = trainctl::WaitForStopSignal(stop_signals)) == SIGHUP) {
    absl::Status reloaded = server.ReloadScheduling();
    if (!reloaded.ok()) {
      TLOG_WARNING << "SIGHUP: " << reloaded.message()
                   << "; the scheduling policy in force stays";
    }
  }
  TLOG_INFO << "signal " << signal_number << ": shutting down";
  server.Shutdown();
  return 0;
}
