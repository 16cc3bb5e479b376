#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/pki.h"
#include "coordinator/auth/cluster_files.h"
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
  StreamLink(grpc::ServerContext* ctx, AgentStream* stream,
             const auth::Authenticator& auth)
      : ctx_(ctx), stream_(stream), auth_(auth) {}

  bool Send(const v1::CoordinatorMessage& message) override {
    if (message.has_assign()) {
      // Each generation's ranks get the key to their own rendezvous keys.
      v1::CoordinatorMessage keyed = message;
      for (v1::RankAssignment& a : *keyed.mutable_assign()->mutable_ranks()) {
        a.set_rendezvous_key(auth_.RendezvousKey(a.job_id(), a.generation()));
      }
      return Write(keyed);
    }
    return Write(message);
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
  bool Write(const v1::CoordinatorMessage& message) {
    std::lock_guard<std::mutex> lock(mu_);
    return stream_ != nullptr && stream_->Write(message);
  }

  std::mutex mu_;
  grpc::ServerContext* ctx_;  // GUARDED_BY(mu_)
  AgentStream* stream_;       // GUARDED_BY(mu_)
  const auth::Authenticator& auth_;
};

constexpr int64_t kWorkerCertificateDays = 730;

}  // namespace

grpc::Status WorkersService::Join(grpc::ServerContext* ctx,
                                  const v1::JoinRequest* req,
                                  v1::JoinResponse* resp) {
  if (absl::Status s = auth_.CheckJoinToken(req->join_token()); !s.ok()) {
    TLOG_WARNING << "refused a join from " << ctx->peer() << ": " << s.message();
    return ToGrpcStatus(s);
  }
  if (ca_.key_pem.empty()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "this coordinator runs --insecure: workers connect "
                        "without certificates (start them with --insecure)");
  }
  if (absl::Status s = auth::CheckName("name", req->name()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  absl::StatusOr<std::string> asked = pki::RequestCommonName(req->csr_pem());
  if (!asked.ok()) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat("csr_pem: ", asked.status().message())));
  }
  if (*asked != req->name()) {
    return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
        "csr_pem: asks for the name '", *asked, "' but the worker is '",
        req->name(), "'")));
  }
  absl::StatusOr<std::string> fingerprint =
      pki::RequestKeyFingerprint(req->csr_pem());
  if (!fingerprint.ok()) return ToGrpcStatus(fingerprint.status());
  if (absl::Status s = CheckSlots("join.slots", req->slots()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (absl::Status s =
          enrollment_.Admit(req->name(), *fingerprint, req->slots());
      !s.ok()) {
    TLOG_WARNING << "refused a join as " << req->name() << " from "
                 << ctx->peer() << ": " << s.message();
    return ToGrpcStatus(s);
  }
  pki::CertificateOrder order;
  order.common_name = req->name();
  order.usage = pki::Usage::kClient;
  order.valid_days = kWorkerCertificateDays;
  absl::StatusOr<std::string> cert =
      pki::IssueCertificate(ca_.cert_pem, ca_.key_pem, req->csr_pem(), order);
  if (!cert.ok()) return ToGrpcStatus(cert.status());
  resp->set_cert_pem(*std::move(cert));
  resp->set_ca_pem(ca_.cert_pem);
  TLOG_INFO << "worker " << req->name() << " joined from " << ctx->peer()
            << "; issued its certificate";
  return grpc::Status::OK;
}

grpc::Status WorkersService::Connect(grpc::ServerContext* ctx,
                                     AgentStream* stream) {
  // Before reading anything: a peer without a worker certificate must not
  // hold a server thread waiting for its first message.
  absl::StatusOr<std::string> identity = auth_.WorkerIdentity(*ctx);
  if (!identity.ok()) {
    TLOG_WARNING << "refused a worker stream from " << ctx->peer() << ": "
                 << identity.status().message();
    return ToGrpcStatus(identity.status());
  }
  v1::AgentMessage first;
  if (!stream->Read(&first)) return grpc::Status::OK;
  if (!first.has_register_()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the first message on the stream must be register");
  }
  const std::string name = first.register_().name();
  if (!identity->empty() && *identity != name) {
    TLOG_WARNING << "refused worker " << name << " from " << ctx->peer()
                 << ": its certificate is for " << *identity;
    return grpc::Status(
        grpc::StatusCode::PERMISSION_DENIED,
        absl::StrCat("register.name '", name, "' is not the name in the "
                     "worker's certificate ('", *identity, "'); start it with "
                     "--name ", *identity, " or join again under the new name"));
  }
  if (!identity->empty()) {
    // The slots were fixed when the node joined: a stolen or rogue
    // certificate cannot claim more and draw every later job to itself.
    absl::StatusOr<int> enrolled = enrollment_.EnrolledSlots(name);
    if (enrolled.ok() && *enrolled > 0 && first.register_().slots() > *enrolled) {
      TLOG_WARNING << "refused worker " << name << " from " << ctx->peer()
                   << ": it claims " << first.register_().slots()
                   << " slots, joined with " << *enrolled;
      return grpc::Status(
          grpc::StatusCode::PERMISSION_DENIED,
          absl::StrCat("register.slots ", first.register_().slots(),
                       " is more than the ", *enrolled, " slots worker '", name,
                       "' joined with; to give it more, join it again with "
                       "its join token and the new --slots"));
    }
  }
  auto link = std::make_shared<StreamLink>(ctx, stream, auth_);
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
      case v1::AgentMessage::kProbeDataResult:
        jobs_.OnProbeDataResult(name, message.probe_data_result());
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
