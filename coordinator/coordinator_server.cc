#include "coordinator/coordinator_server.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/server_builder.h>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "coordinator/sqlite_job_store.h"

namespace trainctl::coordinator {
namespace {

// Specs and log batches are small; this bounds what one bad client can make
// the coordinator buffer.
constexpr int kMaxMessageBytes = 16 << 20;

http::HttpServerOptions HttpOptions(const CoordinatorOptions& options) {
  http::HttpServerOptions http;
  http.tls_cert_file = options.tls_cert_file;
  http.tls_key_file = options.tls_key_file;
  return http;
}

}  // namespace

std::string DefaultStateDir() {
  const char* xdg = getenv("XDG_STATE_HOME");
  if (xdg != nullptr && xdg[0] == '/') return absl::StrCat(xdg, "/trainctl");
  const char* home = getenv("HOME");
  return absl::StrCat(home != nullptr ? home : ".", "/.local/state/trainctl");
}

std::string StateDatabasePath(const std::string& state_dir) {
  return absl::StrCat(state_dir, "/coordinator.db");
}

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Create(
    CoordinatorOptions options, const Clock& clock) {
  std::unique_ptr<JobStore> store;
  if (options.state_dir.empty()) {
    store = std::make_unique<InMemoryJobStore>();
  } else {
    std::error_code ec;
    if (!std::filesystem::is_directory(options.state_dir, ec)) {
      std::filesystem::create_directories(options.state_dir, ec);
      if (!ec) {
        // Job specs and logs may be private: owner only.
        std::filesystem::permissions(options.state_dir,
                                     std::filesystem::perms::owner_all,
                                     std::filesystem::perm_options::replace,
                                     ec);
      }
      if (ec) {
        return absl::UnavailableError(absl::StrCat(
            "cannot create the state directory ", options.state_dir, ": ",
            ec.message(), "; pass a writable --state-dir"));
      }
    }
    ASSIGN_OR_RETURN(store,
                     SqliteJobStore::Open(StateDatabasePath(options.state_dir)));
  }
  return std::make_unique<CoordinatorServer>(std::move(options), clock,
                                             std::move(store));
}

CoordinatorServer::CoordinatorServer(CoordinatorOptions options,
                                     const Clock& clock,
                                     std::unique_ptr<JobStore> store)
    : options_(std::move(options)),
      clock_(clock),
      store_(store != nullptr ? std::move(store)
                              : std::make_unique<InMemoryJobStore>()),
      jobs_(clock_, events_, rendezvous_, *store_, options_.lease_ms,
            options_.heartbeat_interval_ms),
      jobs_service_(jobs_, events_, stopping_),
      workers_service_(jobs_),
      rendezvous_service_(rendezvous_),
      http_routes_(jobs_, events_, rpc_stats_, clock_, stopping_,
                   options_.bearer_check),
      http_server_(
          [this](const http::HttpRequest& request) {
            return http_routes_.Handle(request);
          },
          HttpOptions(options_)) {}

CoordinatorServer::~CoordinatorServer() { Shutdown(); }

absl::StatusOr<int> CoordinatorServer::Start() {
  RETURN_IF_ERROR(jobs_.Recover());
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  // grpc.health.v1.Health (libgrpc++'s built-in implementation): what the
  // Kubernetes `grpc:` probes and load balancers ask. The server starts only
  // after Recover() succeeded, so SERVING means the jobs are loaded.
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options_.listen, grpc::InsecureServerCredentials(),
                           &port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.RegisterService(&jobs_service_);
  builder.RegisterService(&workers_service_);
  builder.RegisterService(&rendezvous_service_);
  // Counts and times every call for /metrics, outside the handlers.
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(rpc_stats_.InterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", options_.listen,
        " (address in use, or not an address of this host?)"));
  }
  // "" (the whole server) is SERVING from the start; name each service too,
  // so a check for one of them is answered rather than NOT_FOUND.
  grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
  for (const char* service :
       {v1::Jobs::service_full_name(), v1::Workers::service_full_name(),
        v1::Rendezvous::service_full_name()}) {
    health->SetServingStatus(service, true);
  }
  if (!options_.http_listen.empty()) {
    absl::StatusOr<int> http_port = http_server_.Start(options_.http_listen);
    if (!http_port.ok()) {
      server_->Shutdown();
      server_->Wait();
      server_.reset();
      return http_port.status();
    }
    http_port_ = *http_port;
    TLOG_INFO << (options_.tls_cert_file.empty() ? "HTTP" : "HTTPS")
              << " (/metrics, /healthz, dashboard) on port " << http_port_
              << (options_.bearer_check ? ", bearer tokens required"
                                        : ", no authentication");
  }
  lease_thread_ = std::thread([this] { LeaseLoop(); });
  TLOG_INFO << "coordinator listening on port " << port;
  return port;
}

void CoordinatorServer::Shutdown() {
  if (stopping_.exchange(true)) return;
  // NOT_SERVING for every service at once, so probes and balancers stop
  // sending work during the shutdown grace below; Check calls still answer.
  if (server_) server_->GetHealthCheckService()->Shutdown();
  {
    std::lock_guard<std::mutex> lock(lease_mu_);
  }
  lease_cv_.notify_all();
  if (lease_thread_.joinable()) lease_thread_.join();
  jobs_.PrepareForShutdown();
  rendezvous_.Shutdown();
  events_.WakeAll();
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(2));
    server_->Wait();
  }
  // Last, so /healthz answers 503 through the gRPC grace period above.
  http_server_.Shutdown();
  if (absl::Status s = jobs_.Flush(); !s.ok()) {
    TLOG_ERROR << "could not record the last job changes: " << s.message();
  }
}

void CoordinatorServer::LeaseLoop() {
  const auto period = std::chrono::milliseconds(
      std::max<int64_t>(50, options_.lease_ms / 4));
  std::unique_lock<std::mutex> lock(lease_mu_);
  while (!stopping_.load()) {
    lease_cv_.wait_for(lock, period, [this] { return stopping_.load(); });
    if (stopping_.load()) break;
    lock.unlock();
    jobs_.CheckLeases();
    lock.lock();
  }
}

}  // namespace trainctl::coordinator
