#include "worker/worker_node.h"

#include <limits.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <thread>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/log.h"
#include "common/stop_signals.h"
#include "worker/agent/collective_host.h"
#include "worker/agent/gpu_slots.h"
#include "worker/agent/node_memory.h"
#include "worker/agent/process_hardening.h"
#include "worker/agent/rank_process.h"
#include "worker/agent/state_dir_lock.h"

namespace trainctl::worker {
namespace {

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

int Refuse(const absl::Status& status, int code) {
  fprintf(stderr, "trainctl-worker: %s\n", std::string(status.message()).c_str());
  return code;
}

// --health-listen: grpc.health.v1.Health, SERVING while registered.
absl::StatusOr<std::unique_ptr<grpc::Server>> StartHealthServer(
    const WorkerFlags& flags, agent::AgentOptions& options) {
  grpc::EnableDefaultHealthCheckService(true);
  // libgrpc++ builds no server whose only service is the health checker
  // (it wants a synchronous service or a polled queue); reflection is one.
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(flags.health_listen,
                           grpc::InsecureServerCredentials(), &port);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    return absl::UnavailableError(absl::StrCat(
        "--health-listen: cannot listen on ", flags.health_listen));
  }
  grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
  health->SetServingStatus(false);  // until registered
  options.on_registration = [health](bool registered) {
    health->SetServingStatus(registered);
  };
  if (!flags.health_port_file.empty()) {
    const std::string tmp = flags.health_port_file + ".tmp";
    std::ofstream(tmp) << port << "\n";
    if (std::rename(tmp.c_str(), flags.health_port_file.c_str()) != 0) {
      return absl::UnavailableError(absl::StrCat(
          "cannot write --health-port-file ", flags.health_port_file));
    }
  }
  TLOG_INFO << "grpc.health.v1 on port " << port;
  return server;
}

// The address ranks bind and advertise for collectives.
void ChooseCollectiveHost(agent::AgentOptions& options) {
  if (options.collective_host.empty()) {
    absl::StatusOr<std::string> local =
        agent::DefaultCollectiveHost(options.coordinator);
    if (local.ok()) {
      options.collective_host = *local;
    } else {
      options.collective_host = Hostname();
      TLOG_WARNING << local.status().message() << "; ranks advertise the "
                   << "hostname " << options.collective_host
                   << " for collectives instead (set --collective-host)";
    }
  }
  const std::string warning = agent::CollectiveHostWarning(
      options.collective_host, options.coordinator);
  if (!warning.empty()) TLOG_WARNING << warning;
  TLOG_INFO << "ranks bind and advertise " << options.collective_host
            << " for collectives";
}

// The agent, on the real coordinator connection and rank processes, until
// one of `stop_signals` arrives.
void RunAgentUntilSignal(const agent::AgentOptions& options,
                         const sigset_t& stop_signals) {
  agent::Agent agent(options, agent::SystemAgentDeps(options));
  std::thread runner([&agent] { agent.Run(); });
  const int signal_number = WaitForStopSignal(stop_signals);
  TLOG_INFO << "signal " << signal_number << ": stopping ranks and exiting";
  agent.Stop();
  runner.join();
}

}  // namespace

absl::StatusOr<std::optional<agent::RankCommand::User>> RankUser(
    const WorkerFlags& flags, uid_t euid, const UserLookup& look_up) {
  if (!flags.rank_user.empty()) {
    absl::StatusOr<agent::RankCommand::User> user = look_up(flags.rank_user);
    if (!user.ok()) return user.status();
    if (user->uid == euid) {
      // Nothing to switch: ranks run as we do, as asked.
      if (user->uid == 0) {
        TLOG_WARNING << "--rank-user " << flags.rank_user
                     << ": every job's code runs as root on this node";
      }
      return std::nullopt;
    }
    if (euid != 0) {
      return absl::FailedPreconditionError(
          "--rank-user needs the worker to run as root (it switches each "
          "rank to that user)");
    }
    return *user;
  }
  if (euid == 0 && !flags.join_only) {
    // A job is code (docs/security.md): as root it could read every key on
    // the node. Running it so must be a choice, not a default.
    if (!flags.allow_root_ranks) {
      return absl::FailedPreconditionError(
          "running as root, every job's code would run as root on this node; "
          "give --rank-user USER to run ranks as that unprivileged user (it "
          "must be able to read the jobs' data and write their checkpoint "
          "directories), or --allow-root-ranks (TRAINCTL_ALLOW_ROOT_RANKS=1) "
          "to accept root ranks");
    }
    TLOG_WARNING << "running as root with --allow-root-ranks: every job's "
                    "code runs as root on this node";
  }
  return std::nullopt;
}

absl::StatusOr<std::string> ReadJoinTokenFile(const std::string& path) {
  absl::StatusOr<std::string> text = ReadWholeFile(path);
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

int RunWorker(WorkerFlags flags) {
  agent::AgentOptions& options = flags.agent;
  agent::WorkerTlsOptions& tls = flags.tls;
  absl::StatusOr<std::vector<std::string>> gpus =
      agent::ParseGpus(flags.gpus, getenv("CUDA_VISIBLE_DEVICES"), "/dev");
  if (!gpus.ok()) return Refuse(gpus.status(), 2);
  options.gpus = *std::move(gpus);
  options.memory_bytes = agent::NodeMemoryBytes();
  options.gpu_memory_bytes = agent::NodeGpuMemoryBytes(options.gpus);
  if (static_cast<int>(options.gpus.size()) > options.slots) {
    TLOG_WARNING << options.gpus.size() << " GPUs but " << options.slots
                 << " slots: GPUs beyond the first " << options.slots
                 << " stay unused (--slots " << options.gpus.size()
                 << " uses them all)";
  }
  absl::StatusOr<std::optional<agent::RankCommand::User>> rank_user =
      RankUser(flags, geteuid(), agent::LookUpUser);
  if (!rank_user.ok()) return Refuse(rank_user.status(), 2);
  options.rank_user = *rank_user;
  // Ranks run as our uid: without this they could read the join token from
  // /proc/<agent>/environ (unsetenv does not change that copy) or memory.
  if (absl::Status hidden = agent::HideFromSameUidProcesses(); !hidden.ok()) {
    TLOG_WARNING << hidden.message();
  }
  // Rank processes inherit the environment; the join token is not theirs.
  unsetenv("TRAINCTL_JOIN_TOKEN");
  if (options.name.empty()) options.name = Hostname();
  if (tls.state_dir.empty()) {
    tls.state_dir = agent::DefaultWorkerStateDir(options.name);
  }
  // Held until exit: a second worker on this state directory would replace
  // our certificate and share our data cache.
  absl::StatusOr<agent::StateDirLock> state_dir_lock =
      agent::StateDirLock::Acquire(tls.state_dir);
  if (!state_dir_lock.ok()) return Refuse(state_dir_lock.status(), 1);
  options.data_cache_dir = flags.data_cache_dir.empty()
                               ? tls.state_dir + "/data-cache"
                               : flags.data_cache_dir;
  if (options.data_cache_dir[0] != '/') {  // ranks may not share our cwd
    char cwd[4096];
    if (getcwd(cwd, sizeof(cwd)) != nullptr) {
      options.data_cache_dir = std::string(cwd) + "/" + options.data_cache_dir;
    }
  }
  if (!flags.join_token_file.empty()) {
    if (!tls.join_token.empty()) {
      return Refuse(absl::InvalidArgumentError(
                        "--join-token-file and --join-token (or "
                        "TRAINCTL_JOIN_TOKEN) both give the join token; give "
                        "one"),
                    1);
    }
    absl::StatusOr<std::string> token = ReadJoinTokenFile(flags.join_token_file);
    if (!token.ok()) return Refuse(token.status(), 1);
    tls.join_token = *token;
  }
  tls.slots = options.slots;
  absl::StatusOr<agent::WorkerCredentials> credentials =
      agent::ObtainCredentials(tls, options.coordinator, options.name);
  if (!credentials.ok()) return Refuse(credentials.status(), 1);
  if (options.rank_user && !flags.join_only) {
    if (absl::Status given = agent::GiveDataCacheToRankUser(
            tls.state_dir, options.data_cache_dir, *options.rank_user);
        !given.ok()) {
      return Refuse(given, 1);
    }
  }
  if (flags.join_only) {
    // A deployment's join step: the agent that runs afterwards finds the
    // certificate in the state directory and never sees the join token.
    printf("trainctl-worker: certificate for '%s' kept in %s\n",
           options.name.c_str(), tls.state_dir.c_str());
    return 0;
  }
  // Before the health server's and the agent's threads, which inherit the
  // mask: a SIGTERM landing in one of them would end the process without
  // stopping the ranks. (Not earlier: Ctrl-C still ends a slow join.)
  const sigset_t stop_signals = BlockStopSignals();
  options.credentials = credentials->channel;
  options.ca_pem = credentials->ca_pem;
  std::unique_ptr<grpc::Server> health_server;
  if (!flags.health_listen.empty()) {
    absl::StatusOr<std::unique_ptr<grpc::Server>> started =
        StartHealthServer(flags, options);
    if (!started.ok()) return Refuse(started.status(), 1);
    health_server = *std::move(started);
  }
  ChooseCollectiveHost(options);
  options.rank_program = SelfPath();
  RunAgentUntilSignal(options, stop_signals);
  if (health_server) health_server->Shutdown();
  return 0;
}

}  // namespace trainctl::worker
