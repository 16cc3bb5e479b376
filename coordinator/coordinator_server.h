#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/server.h>

#include "absl/status/statusor.h"
#include "common/clock.h"
#include "coordinator/auth/authenticator.h"
#include "coordinator/event_hub.h"
#include "coordinator/http/http_routes.h"
#include "coordinator/http/http_server.h"
#include "coordinator/http/rpc_stats.h"
#include "coordinator/job_manager.h"
#include "coordinator/job_store.h"
#include "coordinator/rendezvous.h"
#include "coordinator/services.h"

namespace trainctl::coordinator {

struct CoordinatorOptions {
  std::string listen = "127.0.0.1:7070";  // port 0 picks a free port
  int64_t lease_ms = 10'000;              // a worker silent this long is lost
  int64_t heartbeat_interval_ms = 1'000;  // asked of every agent
  // Directory of the durable state (Create opens StateDatabasePath in it,
  // creating it 0700 if missing); empty keeps state in memory only.
  std::string state_dir;
  // HOST:PORT of the HTTP port (/metrics, /healthz, the dashboard); empty
  // serves none. Port 0 picks a free port.
  std::string http_listen;
  // Plaintext ports and no authentication (everyone is an admin). Otherwise
  // the ports use TLS with the state directory's cluster files
  // (auth/cluster_files.h), created on the first start when missing.
  bool insecure = false;
  // Extra names (hosts, IPs) for a server certificate created on this start.
  std::vector<std::string> server_names;
  // Who may submit `model: {type: torchscript}` jobs, whose model is code
  // that runs as the worker's user: everyone, admins only, or nobody.
  TorchScriptPolicy torchscript = TorchScriptPolicy::kAllow;
  // Finished jobs kept (record, events, catalog): the newest this many, for
  // at most this many days (0: no limit). `trainctl delete` forgets one.
  int64_t keep_finished_jobs = 10'000;
  int64_t keep_finished_days = 90;
  // What GetServerInfo reports of this build (main.cc fills it in).
  std::string version = "unknown", grpc_version = "unknown",
              protobuf_version = "unknown";
  // Bytes of each unfinished job's newest events kept in memory for
  // watchers; older ones (and a finished job's) are read from the store.
  size_t event_tail_bytes = EventHub::kDefaultTailBytes;
  // gRPC server reflection (for grpcurl); off: it answers without a token.
  bool reflection = false;
  // Priority classes, quotas and fair share (docs/scheduling.md); empty:
  // one class, no quotas. Read at Start and by ReloadScheduling.
  std::string scheduling_file;
  // Files jobs ship from their submitters' machines: at most this large
  // each, kept in <state_dir>/files (a temporary directory without one)
  // while a job names them.
  int64_t max_file_bytes = int64_t{1} << 30;
};

// How the coordinator's ports authenticate: the Authenticator, the CA that
// signs workers' certificates and the ports' own certificate. Insecure()
// has no TLS and a per-process rendezvous secret.
struct Security {
  std::unique_ptr<auth::Authenticator> auth;
  ClusterCa ca;
  std::string server_cert_pem, server_key_pem;  // empty: plaintext
  std::string server_cert_file, server_key_file;  // the same, for HTTPS

  static Security Insecure(std::string rendezvous_secret = "");
};

// The security of a coordinator with these options: with TLS, loads (and
// first creates) the state directory's cluster files; insecure, only the
// rendezvous secret (kept in the state directory when there is one).
absl::StatusOr<Security> LoadSecurity(const CoordinatorOptions& options);

// $XDG_STATE_HOME/trainctl, else $HOME/.local/state/trainctl.
std::string DefaultStateDir();
// The SQLite file a coordinator uses under `state_dir`.
std::string StateDatabasePath(const std::string& state_dir);

// Composition root: owns every subsystem (members in dependency order) and
// the gRPC server. Start once (it recovers the stored jobs first), then
// Shutdown once (the destructor does it if needed). Not copyable.
class CoordinatorServer {
 public:
  // Opens the store of options.state_dir (SqliteJobStore; in memory when
  // empty) and builds the server on it. The store's errors name the file and
  // what to do (DATA_LOSS, FAILED_PRECONDITION, UNAVAILABLE); the caller
  // should not start without it.
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Create(
      CoordinatorOptions options, const Clock& clock);
  // On `store`, or an InMemoryJobStore when null (options.state_dir is not
  // looked at), with `security` (Security::Insecure() when its auth is null).
  CoordinatorServer(CoordinatorOptions options, const Clock& clock,
                    std::unique_ptr<JobStore> store = nullptr,
                    Security security = {});
  ~CoordinatorServer();
  CoordinatorServer(const CoordinatorServer&) = delete;
  CoordinatorServer& operator=(const CoordinatorServer&) = delete;

  // Recovers the stored jobs, binds and starts serving; returns the bound
  // gRPC port. Recovery errors come back as they are: do not serve then.
  // With options.http_listen the HTTP port starts too; failing to bind it
  // fails Start (an operator who asked for metrics wants to know).
  absl::StatusOr<int> Start();
  // Reads scheduling_file again (SIGHUP) and puts it in force; on an error
  // (returned, naming the file and field) the policy in force stays.
  absl::Status ReloadScheduling();
  // The bound HTTP port after Start(); 0 when none is served.
  int http_port() const { return http_port_; }
  // Stops accepting calls, ends every stream and wait, and joins threads.
  void Shutdown();

  Rendezvous& rendezvous() { return rendezvous_; }
  const auth::Authenticator& authenticator() const { return *security_.auth; }

 private:
  void LeaseLoop();
  // Deletes shipped files no kept job names (FileStore::Sweep).
  void SweepFiles();
  // After Recover: each RUNNING job's current generation gets back the
  // rendezvous keys the store kept; every other kept key is forgotten.
  absl::Status RestoreRendezvous();

  // The rendezvous keys in the job store (JobStore::PutRendezvousKey).
  class StoreRendezvousJournal : public RendezvousJournal {
   public:
    explicit StoreRendezvousJournal(JobStore& store) : store_(store) {}
    absl::Status Put(const std::string& job_id, int generation,
                     const std::string& key, const std::string& value) override {
      return store_.PutRendezvousKey({job_id, generation, key, value});
    }
    void Erase(const std::string& job_id, int generation,
               const std::string& key) override;
    void Drop(const std::string& job_id, int below_generation) override;

   private:
    JobStore& store_;
  };

  const CoordinatorOptions options_;
  const Clock& clock_;
  const ServerBuild build_;  // started_unix_ms: when this server was made
  std::atomic<bool> stopping_{false};
  std::unique_ptr<JobStore> store_;
  Security security_;
  EventHub events_;
  // Without a state directory: a temporary one for the shipped files,
  // removed with the server.
  std::string temporary_files_dir_;
  FileStore files_;
  StoreRendezvousJournal rendezvous_journal_;
  Rendezvous rendezvous_;
  JobManager jobs_;
  JobsService jobs_service_;
  WorkersService workers_service_;
  RendezvousService rendezvous_service_;
  http::RpcStats rpc_stats_;
  http::HttpRoutes http_routes_;
  http::HttpServer http_server_;
  int http_port_ = 0;
  std::unique_ptr<grpc::Server> server_;
  std::mutex lease_mu_;
  std::condition_variable lease_cv_;
  std::thread lease_thread_;
};

}  // namespace trainctl::coordinator
