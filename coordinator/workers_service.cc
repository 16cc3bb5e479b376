#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/pki.h"
#include "coordinator/agent_stream.h"
#include "coordinator/auth/cluster_files.h"
#include "coordinator/services.h"

namespace trainctl::coordinator {
namespace {

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

grpc::ServerBidiReactor<v1::AgentMessage, v1::CoordinatorMessage>*
WorkersService::Connect(grpc::CallbackServerContext* ctx) {
  return NewAgentStream(ctx, jobs_, auth_, enrollment_);
}

}  // namespace trainctl::coordinator
