#include "coordinator/coordinator_server.h"

#include <chrono>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/server_builder.h>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace trainctl::coordinator {
namespace {

// Specs and log batches are small; this bounds what one bad client can make
// the coordinator buffer.
constexpr int kMaxMessageBytes = 16 << 20;

}  // namespace

CoordinatorServer::CoordinatorServer(CoordinatorOptions options,
                                     const Clock& clock)
    : options_(std::move(options)),
      clock_(clock),
      jobs_(clock_, events_, rendezvous_, options_.lease_ms,
            options_.heartbeat_interval_ms),
      jobs_service_(jobs_, events_, stopping_),
      workers_service_(jobs_),
      rendezvous_service_(rendezvous_) {}

CoordinatorServer::~CoordinatorServer() { Shutdown(); }

absl::StatusOr<int> CoordinatorServer::Start() {
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(options_.listen, grpc::InsecureServerCredentials(),
                           &port);
  builder.SetMaxReceiveMessageSize(kMaxMessageBytes);
  builder.RegisterService(&jobs_service_);
  builder.RegisterService(&workers_service_);
  builder.RegisterService(&rendezvous_service_);
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0) {
    server_.reset();
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", options_.listen,
        " (address in use, or not an address of this host?)"));
  }
  lease_thread_ = std::thread([this] { LeaseLoop(); });
  TLOG_INFO << "coordinator listening on port " << port;
  return port;
}

void CoordinatorServer::Shutdown() {
  if (stopping_.exchange(true)) return;
  {
    std::lock_guard<std::mutex> lock(lease_mu_);
  }
  lease_cv_.notify_all();
  if (lease_thread_.joinable()) lease_thread_.join();
  rendezvous_.Shutdown();
  events_.WakeAll();
  if (server_) {
    server_->Shutdown(std::chrono::system_clock::now() +
                      std::chrono::seconds(2));
    server_->Wait();
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
