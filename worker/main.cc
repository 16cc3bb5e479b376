// trainctl-worker: the node agent, and (as `trainctl-worker rank ...`) the
// rank process it spawns for each assigned slot.

#include <limits.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <cstdlib>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>
#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/log.h"
#include "worker/agent/agent.h"
#include "worker/agent/collective_host.h"
#include "worker/agent/gpu_slots.h"
#include "worker/agent/process_hardening.h"
#include "worker/agent/rank_process.h"
#include "worker/agent/state_dir_lock.h"
#include "worker/agent/worker_credentials.h"
#include "worker/train/rank_main.h"

// Set by CMake (cmake/trainctl_build_info.cmake); a build without them says
// so instead of guessing. An empty CUDA version means a CPU-only LibTorch.
#ifndef TRAINCTL_GRPC_VERSION
#define TRAINCTL_GRPC_VERSION "unknown"
#endif
#ifndef TRAINCTL_PROTOBUF_VERSION
#define TRAINCTL_PROTOBUF_VERSION "unknown"
#endif
#ifndef TRAINCTL_TORCH_VERSION
#define TRAINCTL_TORCH_VERSION "unknown"
#endif
#ifndef TRAINCTL_CUDA_VERSION
#define TRAINCTL_CUDA_VERSION ""
#endif
#ifndef TRAINCTL_NCCL_VERSION
#define TRAINCTL_NCCL_VERSION ""
#endif

namespace {

// What --version prints: this build and the libraries it was compiled with.
std::string VersionText() {
  const std::string cuda = TRAINCTL_CUDA_VERSION;
  const std::string accelerator =
      cuda.empty() ? "CPU only (LibTorch without CUDA; collectives use Gloo)"
                   : "CUDA " + cuda + ", NCCL " + TRAINCTL_NCCL_VERSION;
  return std::string("trainctl-worker ") + TRAINCTL_VERSION +
         "\n"
         "  LibTorch " TRAINCTL_TORCH_VERSION
         "\n"
         "  gRPC " TRAINCTL_GRPC_VERSION
         "\n"
         "  Protobuf " TRAINCTL_PROTOBUF_VERSION "\n  " +
         accelerator;
}

std::string Hostname() {
  char buf[HOST_NAME_MAX + 1] = {};
  gethostname(buf, sizeof(buf) - 1);
  return buf;
}

std::string SelfPath() {
  char buf[PATH_MAX] = {};
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "trainctl-worker";
}

// The join token in `path` (--join-token-file), without the whitespace and
// newline around it. Errors name the flag and the file.
absl::StatusOr<std::string> ReadJoinTokenFile(const std::string& path) {
  absl::StatusOr<std::string> text = trainctl::ReadWholeFile(path);
  if (!text.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--join-token-file ", path, ": ", text.status().message()));
  }
  const std::string token(absl::StripAsciiWhitespace(*text));
  if (token.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--join-token-file ", path,
        ": the file is empty; copy the coordinator's auth/join.token into it"));
  }
  return token;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && strcmp(argv[1], "rank") == 0) {
    return trainctl::train::RankMain(argc - 1, argv + 1);
  }
  trainctl::agent::AgentOptions options;
  CLI::App app{"trainctl-worker: the node agent. Registers this node's slots "
               "with the coordinator and runs one rank process per assigned "
               "slot.\n\nExample:\n  trainctl-worker --coordinator "
               "head:7070 --slots 2 --name node-a"};
  app.set_version_flag("--version", VersionText());
  app.footer(
      "\nThe worker serves no port: it is alive while this process runs, "
      "and `trainctl workers` shows whether the coordinator hears it.");
  app.add_option("--coordinator", options.coordinator,
                 "coordinator address HOST:PORT")
      ->capture_default_str()
      ->envname("TRAINCTL_COORDINATOR");
  app.add_option("--slots", options.slots, "rank slots this node offers")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  std::string gpus = "auto";
  app.add_option("--gpus", gpus,
                 "GPUs for the slots, one each: auto (those "
                 "CUDA_VISIBLE_DEVICES lists, else every /dev/nvidiaN), none, "
                 "or CUDA device ids such as 0,1,3; a GPU job's ranks run "
                 "only on slots with one")
      ->capture_default_str()
      ->envname("TRAINCTL_GPUS");
  app.add_option("--name", options.name,
                 "unique worker name (default: the hostname)");
  app.add_option("--cpus", options.cpus,
                 "cores shared by this node's ranks (default: all); each rank "
                 "gets cpus/slots intra-op threads unless the spec says")
      ->check(CLI::Range(0, 4096));
  app.add_option("--collective-host", options.collective_host,
                 "address other ranks reach this node's ranks at; it must be "
                 "an address of this node, ranks bind it (default: the local "
                 "address this node reaches the coordinator from; 127.0.0.1 "
                 "for a loopback coordinator)");
  app.add_option("--kill-grace-ms", options.kill_grace_ms,
                 "after SIGTERM, wait this long before SIGKILL")
      ->capture_default_str();
  trainctl::agent::WorkerTlsOptions tls;
  app.add_option("--ca-cert", tls.ca_cert_file,
                 "the cluster CA certificate (the coordinator's tls/ca.crt)")
      ->envname("TRAINCTL_CA_CERT");
  app.add_option("--join-token", tls.join_token,
                 "the cluster's join token (the coordinator's "
                 "auth/join.token), traded once for this worker's certificate")
      ->envname("TRAINCTL_JOIN_TOKEN");
  std::string join_token_file;
  app.add_option("--join-token-file", join_token_file,
                 "read the join token from this file instead (whitespace "
                 "around it is ignored), so that it appears in no process "
                 "list or environment")
      ->envname("TRAINCTL_JOIN_TOKEN_FILE");
  app.add_option("--cert", tls.cert_file,
                 "this worker's certificate, signed by the cluster CA and "
                 "named after --name (instead of --join-token)");
  app.add_option("--key", tls.key_file, "the private key of --cert");
  app.add_option("--state-dir", tls.state_dir,
                 "where a joined certificate is kept (created 0700); one "
                 "worker at a time (default: "
                 "$XDG_STATE_HOME/trainctl-worker/NAME, else "
                 "~/.local/state/trainctl-worker/NAME)");
  std::string data_cache_dir;
  app.add_option("--data-cache-dir", data_cache_dir,
                 "where ranks keep decoded copies of gzip-compressed data "
                 "files, so the next job on them starts without inflating "
                 "them again (default: STATE_DIR/data-cache)");
  app.add_option("--data-cache-mb", options.data_cache_mb,
                 "most disk the decoded copies may use, least recently used "
                 "dropped first; 0 turns the cache off")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--standby-heap-mb", options.standby_heap_mb,
                 "heap each waiting rank process maps in advance, so that a "
                 "job's first step does not page-fault (0: none)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  std::string health_listen;
  std::string health_port_file;
  app.add_option("--health-listen", health_listen,
                 "HOST:PORT to serve grpc.health.v1.Health on (plaintext, for "
                 "probes: SERVING while registered with the coordinator); "
                 "port 0 picks a free port; empty (the default) serves none");
  app.add_option("--health-port-file", health_port_file,
                 "write the bound health port to this file once serving");
  app.add_flag("--insecure", tls.insecure,
               "plaintext and no certificate, for a coordinator run with "
               "--insecure (a demo on loopback)");
  bool join_only = false;
  app.add_flag("--join-only", join_only,
               "obtain (or renew) this worker's certificate with the join "
               "token, keep it in --state-dir and exit: run it as a "
               "separate step so the agent and its ranks never hold the "
               "token");
  std::string rank_user;
  app.add_option("--rank-user", rank_user,
                 "run rank processes as this user (the worker must run as "
                 "root): a job's code then cannot read the worker's key, "
                 "state directory or join token")
      ->envname("TRAINCTL_RANK_USER");
  bool allow_root_ranks = false;
  app.add_flag("--allow-root-ranks", allow_root_ranks,
               "as root without --rank-user, run job code as root anyway "
               "(without it such a worker refuses to start)")
      ->envname("TRAINCTL_ALLOW_ROOT_RANKS");
  CLI11_PARSE(app, argc, argv);
  {
    absl::StatusOr<std::vector<std::string>> parsed =
        trainctl::agent::ParseGpus(gpus, getenv("CUDA_VISIBLE_DEVICES"), "/dev");
    if (!parsed.ok()) {
      fprintf(stderr, "trainctl-worker: %s\n",
              std::string(parsed.status().message()).c_str());
      return 2;
    }
    options.gpus = *std::move(parsed);
    if (static_cast<int>(options.gpus.size()) > options.slots) {
      TLOG_WARNING << options.gpus.size() << " GPUs but " << options.slots
                   << " slots: GPUs beyond the first " << options.slots
                   << " stay unused (--slots " << options.gpus.size()
                   << " uses them all)";
    }
  }
  if (!rank_user.empty()) {
    absl::StatusOr<trainctl::agent::RankCommand::User> user =
        trainctl::agent::LookUpUser(rank_user);
    if (!user.ok()) {
      fprintf(stderr, "trainctl-worker: %s\n",
              std::string(user.status().message()).c_str());
      return 2;
    }
    if (user->uid == geteuid()) {
      // Nothing to switch: ranks run as we do, as asked.
      if (user->uid == 0) {
        TLOG_WARNING << "--rank-user " << rank_user
                     << ": every job's code runs as root on this node";
      }
    } else if (geteuid() != 0) {
      fprintf(stderr, "trainctl-worker: --rank-user needs the worker to run "
                      "as root (it switches each rank to that user)\n");
      return 2;
    } else {
      options.rank_user = *user;
    }
  } else if (geteuid() == 0 && !join_only) {
    // A job is code (docs/security.md): as root it could read every key on
    // the node. Running it so must be a choice, not a default.
    if (!allow_root_ranks) {
      fprintf(stderr,
              "trainctl-worker: running as root, every job's code would run "
              "as root on this node; give --rank-user USER to run ranks as "
              "that unprivileged user (it must be able to read the jobs' "
              "data and write their checkpoint directories), or "
              "--allow-root-ranks (TRAINCTL_ALLOW_ROOT_RANKS=1) to accept "
              "root ranks\n");
      return 2;
    }
    TLOG_WARNING << "running as root with --allow-root-ranks: every job's "
                    "code runs as root on this node";
  }
  // Ranks run as our uid: without this they could read the join token from
  // /proc/<agent>/environ (unsetenv does not change that copy) or memory.
  if (absl::Status hidden = trainctl::agent::HideFromSameUidProcesses();
      !hidden.ok()) {
    TLOG_WARNING << hidden.message();
  }
  // Rank processes inherit the environment; the join token is not theirs.
  unsetenv("TRAINCTL_JOIN_TOKEN");
  if (options.name.empty()) options.name = Hostname();
  if (tls.state_dir.empty()) {
    tls.state_dir = trainctl::agent::DefaultWorkerStateDir(options.name);
  }
  // Held until exit: a second worker on this state directory would replace
  // our certificate and share our data cache.
  absl::StatusOr<trainctl::agent::StateDirLock> state_dir_lock =
      trainctl::agent::StateDirLock::Acquire(tls.state_dir);
  if (!state_dir_lock.ok()) {
    fprintf(stderr, "trainctl-worker: %s\n",
            std::string(state_dir_lock.status().message()).c_str());
    return 1;
  }
  options.data_cache_dir = data_cache_dir.empty()
                               ? tls.state_dir + "/data-cache"
                               : data_cache_dir;
  if (options.data_cache_dir[0] != '/') {  // ranks may not share our cwd
    char cwd[4096];
    if (getcwd(cwd, sizeof(cwd)) != nullptr) {
      options.data_cache_dir = std::string(cwd) + "/" + options.data_cache_dir;
    }
  }
  if (!join_token_file.empty()) {
    if (!tls.join_token.empty()) {
      fprintf(stderr,
              "trainctl-worker: --join-token-file and --join-token (or "
              "TRAINCTL_JOIN_TOKEN) both give the join token; give one\n");
      return 1;
    }
    absl::StatusOr<std::string> token = ReadJoinTokenFile(join_token_file);
    if (!token.ok()) {
      fprintf(stderr, "trainctl-worker: %s\n",
              std::string(token.status().message()).c_str());
      return 1;
    }
    tls.join_token = *token;
  }
  tls.slots = options.slots;
  absl::StatusOr<trainctl::agent::WorkerCredentials> credentials =
      trainctl::agent::ObtainCredentials(tls, options.coordinator, options.name);
  if (!credentials.ok()) {
    fprintf(stderr, "trainctl-worker: %s\n",
            std::string(credentials.status().message()).c_str());
    return 1;
  }
  if (options.rank_user && !join_only) {
    if (absl::Status given = trainctl::agent::GiveDataCacheToRankUser(
            tls.state_dir, options.data_cache_dir, *options.rank_user);
        !given.ok()) {
      fprintf(stderr, "trainctl-worker: %s\n",
              std::string(given.message()).c_str());
      return 1;
    }
  }
  if (join_only) {
    // A deployment's join step: the agent that runs afterwards finds the
    // certificate in the state directory and never sees the join token.
    printf("trainctl-worker: certificate for '%s' kept in %s\n",
           options.name.c_str(), tls.state_dir.c_str());
    return 0;
  }
  options.credentials = credentials->channel;
  options.ca_pem = credentials->ca_pem;
  std::unique_ptr<grpc::Server> health_server;
  if (!health_listen.empty()) {
    grpc::EnableDefaultHealthCheckService(true);
    // libgrpc++ builds no server whose only service is the health checker
    // (it wants a synchronous service or a polled queue); reflection is one.
    grpc::reflection::InitProtoReflectionServerBuilderPlugin();
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort(health_listen, grpc::InsecureServerCredentials(),
                             &port);
    health_server = builder.BuildAndStart();
    if (health_server == nullptr || port == 0) {
      fprintf(stderr, "trainctl-worker: --health-listen: cannot listen on %s\n",
              health_listen.c_str());
      return 1;
    }
    grpc::HealthCheckServiceInterface* health =
        health_server->GetHealthCheckService();
    health->SetServingStatus(false);  // until registered
    options.on_registration = [health](bool registered) {
      health->SetServingStatus(registered);
    };
    if (!health_port_file.empty()) {
      const std::string tmp = health_port_file + ".tmp";
      std::ofstream(tmp) << port << "\n";
      if (std::rename(tmp.c_str(), health_port_file.c_str()) != 0) {
        fprintf(stderr, "trainctl-worker: cannot write --health-port-file %s\n",
                health_port_file.c_str());
        return 1;
      }
    }
    TLOG_INFO << "grpc.health.v1 on port " << port;
  }
  if (options.collective_host.empty()) {
    absl::StatusOr<std::string> local =
        trainctl::agent::DefaultCollectiveHost(options.coordinator);
    if (local.ok()) {
      options.collective_host = *local;
    } else {
      options.collective_host = Hostname();
      TLOG_WARNING << local.status().message() << "; ranks advertise the "
                   << "hostname " << options.collective_host
                   << " for collectives instead (set --collective-host)";
    }
  }
  const std::string warning = trainctl::agent::CollectiveHostWarning(
      options.collective_host, options.coordinator);
  if (!warning.empty()) TLOG_WARNING << warning;
  TLOG_INFO << "ranks bind and advertise " << options.collective_host
            << " for collectives";
  options.rank_program = SelfPath();

  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  trainctl::agent::Agent agent(options, trainctl::agent::SystemAgentDeps(options));
  std::thread runner([&agent] { agent.Run(); });
  int signal_number = 0;
  sigwait(&stop_signals, &signal_number);
  TLOG_INFO << "signal " << signal_number << ": stopping ranks and exiting";
  agent.Stop();
  runner.join();
  if (health_server) health_server->Shutdown();
  return 0;
}
