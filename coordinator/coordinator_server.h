#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <grpcpp/server.h>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "coordinator/event_hub.h"
#include "coordinator/job_manager.h"
#include "coordinator/rendezvous.h"
#include "coordinator/services.h"

namespace trainctl::coordinator {

struct CoordinatorOptions {
  std::string listen = "127.0.0.1:7070";  // port 0 picks a free port
  int64_t lease_ms = 10'000;              // a worker silent this long is lost
  int64_t heartbeat_interval_ms = 1'000;  // asked of every agent
};

// Composition root: owns every subsystem (members in dependency order) and
// the gRPC server. Start once, then Shutdown once (the destructor does it
// if needed). Not copyable.
class CoordinatorServer {
 public:
  CoordinatorServer(CoordinatorOptions options, const Clock& clock);
  ~CoordinatorServer();
  CoordinatorServer(const CoordinatorServer&) = delete;
  CoordinatorServer& operator=(const CoordinatorServer&) = delete;

  // Binds and starts serving; returns the bound port.
  absl::StatusOr<int> Start();
  // Stops accepting calls, ends every stream and wait, and joins threads.
  void Shutdown();

  JobManager& jobs() { return jobs_; }

 private:
  void LeaseLoop();

  const CoordinatorOptions options_;
  const Clock& clock_;
  std::atomic<bool> stopping_{false};
  EventHub events_;
  Rendezvous rendezvous_;
  JobManager jobs_;
  JobsService jobs_service_;
  WorkersService workers_service_;
  RendezvousService rendezvous_service_;
  std::unique_ptr<grpc::Server> server_;
  std::mutex lease_mu_;
  std::condition_variable lease_cv_;
  std::thread lease_thread_;
};

}  // namespace trainctl::coordinator
