#include <memory>
#include <mutex>

#include "common/grpc_status.h"
#include "common/log.h"
#include "coordinator/services.h"

namespace trainctl::coordinator {
namespace {

using AgentStream =
    grpc::ServerReaderWriter<v1::CoordinatorMessage, v1::AgentMessage>;

// AgentLink over the agent's gRPC stream. Writes are serialized; Close()
// waits for a write in progress, after which the stream is never touched
// again (the handler may return and gRPC frees it).
class StreamLink final : public AgentLink {
 public:
  StreamLink(grpc::ServerContext* ctx, AgentStream* stream)
      : ctx_(ctx), stream_(stream) {}

  bool Send(const v1::CoordinatorMessage& message) override {
    std::lock_guard<std::mutex> lock(mu_);
    return stream_ != nullptr && stream_->Write(message);
  }

  void Disconnect() override {
    std::lock_guard<std::mutex> lock(mu_);
    if (ctx_ != nullptr) ctx_->TryCancel();
  }

  void Close() {
    std::lock_guard<std::mutex> lock(mu_);
    stream_ = nullptr;
    ctx_ = nullptr;
  }

 private:
  std::mutex mu_;
  grpc::ServerContext* ctx_;  // GUARDED_BY(mu_)
  AgentStream* stream_;       // GUARDED_BY(mu_)
};

}  // namespace

grpc::Status WorkersService::Connect(grpc::ServerContext* ctx,
                                     AgentStream* stream) {
  v1::AgentMessage first;
  if (!stream->Read(&first)) return grpc::Status::OK;
  if (!first.has_register_()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the first message on the stream must be register");
  }
  const std::string name = first.register_().name();
  auto link = std::make_shared<StreamLink>(ctx, stream);
  absl::Status registered = jobs_.RegisterWorker(first.register_(), link);
  if (!registered.ok()) {
    TLOG_WARNING << "rejected worker registration from " << ctx->peer()
                 << ": " << registered.message();
    link->Close();
    return ToGrpcStatus(registered);
  }

  v1::AgentMessage message;
  while (stream->Read(&message)) {
    jobs_.Heartbeat(name);
    absl::Status handled;
    switch (message.msg_case()) {
      case v1::AgentMessage::kHeartbeat:
        jobs_.OnProgress(name, message.heartbeat());
        break;
      case v1::AgentMessage::kCheckpoint:
        handled = jobs_.OnRankCheckpoint(name, message.checkpoint());
        break;
      case v1::AgentMessage::kRankStatus:
        handled = jobs_.OnRankStatus(name, message.rank_status());
        break;
      case v1::AgentMessage::kMetrics:
        handled = jobs_.OnRankMetrics(name, message.metrics());
        break;
      case v1::AgentMessage::kLog:
        handled = jobs_.OnRankLog(name, message.log());
        break;
      default:
        handled = absl::InvalidArgumentError(
            "unexpected message on an established agent stream");
    }
    // A bad message is the agent's problem, not a reason to drop the node.
    if (!handled.ok()) {
      TLOG_WARNING << "worker " << name << ": " << handled.message();
    }
  }
  link->Close();
  jobs_.WorkerDisconnected(name, link.get());
  return grpc::Status::OK;
}

}  // namespace trainctl::coordinator
