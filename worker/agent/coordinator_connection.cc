#include "worker/agent/coordinator_connection.h"

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include "trainctl/v1/workers.grpc.pb.h"

namespace trainctl::agent {
namespace {

// What the coordinator may send in one message: an assignment carries the
// job's spec (up to the 16 MiB the coordinator accepts) once per worker.
constexpr int kMaxCoordinatorMessageBytes = 128 << 20;

class GrpcStream final : public CoordinatorStream {
 public:
  explicit GrpcStream(v1::Workers::Stub& stub)
      : stream_(stub.Connect(&context_)) {}

  bool Write(const v1::AgentMessage& message) override {
    return stream_->Write(message);
  }
  bool Read(v1::CoordinatorMessage* message) override {
    return stream_->Read(message);
  }
  void Cancel() override { context_.TryCancel(); }
  absl::Status Finish() override {
    const grpc::Status status = stream_->Finish();
    if (status.ok()) return absl::OkStatus();
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                        status.error_message());
  }

 private:
  grpc::ClientContext context_;
  std::unique_ptr<
      grpc::ClientReaderWriter<v1::AgentMessage, v1::CoordinatorMessage>>
      stream_;
};

class GrpcConnection final : public CoordinatorConnection {
 public:
  explicit GrpcConnection(std::shared_ptr<grpc::Channel> channel)
      : channel_(std::move(channel)), stub_(v1::Workers::NewStub(channel_)) {}

  bool WaitForConnected(std::chrono::milliseconds timeout) override {
    return channel_->WaitForConnected(std::chrono::system_clock::now() +
                                      timeout);
  }
  std::unique_ptr<CoordinatorStream> Connect() override {
    return std::make_unique<GrpcStream>(*stub_);
  }

 private:
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Workers::Stub> stub_;
};

}  // namespace

// gRPC's own reconnect backoff grows to 120 s by default, and while it waits
// every fail-fast call fails at once: layered under the agent's retries,
// agents came back half a minute after a restarted coordinator was serving.
// Capped at under a second here, so the channel tries again within a second
// of the coordinator being back. (GRPC_ARG_MIN_RECONNECT_BACKOFF_MS is the
// connect timeout in gRPC 1.51, not a backoff: left at its default so a slow
// TLS handshake completes.)
std::unique_ptr<CoordinatorConnection> GrpcCoordinatorConnection(
    const std::string& address,
    std::shared_ptr<grpc::ChannelCredentials> credentials) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 800);  // +20% jitter < 1 s
  args.SetMaxReceiveMessageSize(kMaxCoordinatorMessageBytes);
  return std::make_unique<GrpcConnection>(grpc::CreateCustomChannel(
      address,
      credentials != nullptr ? credentials : grpc::InsecureChannelCredentials(),
      args));
}

}  // namespace trainctl::agent
