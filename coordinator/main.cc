// trainctl-coordinator: parses flags and runs CoordinatorServer until
// SIGINT or SIGTERM.

#include <signal.h>

#include <cstdio>
#include <fstream>

#include <CLI/CLI.hpp>

#include "common/clock.h"
#include "common/log.h"
#include "coordinator/coordinator_server.h"

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

}  // namespace

int main(int argc, char** argv) {
  trainctl::coordinator::CoordinatorOptions options;
  options.state_dir = trainctl::coordinator::DefaultStateDir();
  std::string port_file;
  std::string http_port_file;
  CLI::App app{"trainctl-coordinator: queues training jobs, assigns ranks to "
               "workers, serves rendezvous and streams metrics."};
  app.set_version_flag("--version", kVersionText);
  app.footer(
      "\nServes trainctl.v1.{Jobs,Workers,Rendezvous}, gRPC reflection and "
      "grpc.health.v1.Health on --listen; with --http-listen, Prometheus "
      "/metrics, /healthz and a web dashboard (docs/observability.md).");
  app.add_option("--listen", options.listen,
                 "HOST:PORT to serve gRPC on; port 0 picks a free port")
      ->capture_default_str();
  app.add_option("--port-file", port_file,
                 "write the bound port to this file once serving");
  app.add_option("--http-listen", options.http_listen,
                 "HOST:PORT to serve /metrics, /healthz and the dashboard on "
                 "(plain HTTP, no authentication: keep it on loopback or a "
                 "private network); port 0 picks a free port; empty (the "
                 "default) serves no HTTP")
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
                 "directory of the job database (created 0700 if missing); "
                 "jobs survive restarts through it")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (options.state_dir.empty()) {
    fprintf(stderr, "trainctl-coordinator: --state-dir must not be empty\n");
    return 1;
  }
  if (!http_port_file.empty() && options.http_listen.empty()) {
    fprintf(stderr, "trainctl-coordinator: --http-port-file needs --http-listen\n");
    return 1;
  }

  // Block the stop signals in every thread; the main thread waits for them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

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
  sigwait(&stop_signals, &signal_number);
  TLOG_INFO << "signal " << signal_number << ": shutting down";
  server.Shutdown();
  return 0;
}
