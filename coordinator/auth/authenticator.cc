#include "coordinator/auth/authenticator.h"

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/pki.h"

namespace trainctl::coordinator::auth {
namespace {


constexpr char kNeedToken[] =
    "this call needs a user token: run `trainctl login --token TOKEN` (an "
    "admin makes one with `trainctl-coordinator add-user NAME`), or pass "
    "--token / set TRAINCTL_TOKEN";

absl::StatusOr<Caller> ToCaller(const absl::StatusOr<TokenHolder>& holder) {
  if (!holder.ok()) return holder.status();
  switch (holder->role) {
    case TokenRole::kAdmin: return Caller{holder->name, Caller::Role::kAdmin};
    case TokenRole::kUser: return Caller{holder->name, Caller::Role::kUser};
    case TokenRole::kJoin: break;
  }
  return absl::PermissionDeniedError(
      "a join token only lets a worker obtain its certificate; use a user token");
}

absl::StatusOr<absl::string_view> BearerToken(absl::string_view header) {
  if (!absl::ConsumePrefix(&header, "Bearer ") || header.empty()) {
    return absl::UnauthenticatedError(
        "the authorization header must be \"Bearer TOKEN\"");
  }
  return header;
}

// Runs in gRPC's auth filter, before the handler: a malformed or unknown
// token ends the call there. It records nothing: gRPC's AuthContext belongs
// to the connection, not the call, so each handler resolves the call's own
// header again (Authenticator::Person) and a revoked token stops working on
// the next call even on a connection that used it before.
class TokenProcessor final : public grpc::AuthMetadataProcessor {
 public:
  explicit TokenProcessor(TokenStore& tokens) : tokens_(tokens) {}

  bool IsBlocking() const override { return true; }  // stats a file

  grpc::Status Process(const InputMetadata& metadata,
                       grpc::AuthContext* /*context*/,
                       OutputMetadata* /*consumed*/,
                       OutputMetadata* /*response*/) override {
    auto it = metadata.find("authorization");
    if (it == metadata.end()) return grpc::Status::OK;  // a worker or a rank
    const absl::string_view value(it->second.data(), it->second.size());
    absl::StatusOr<absl::string_view> token = BearerToken(value);
    if (!token.ok()) return ToGrpcStatus(token.status());
    absl::StatusOr<TokenHolder> holder = tokens_.Lookup(*token);
    if (!holder.ok()) return ToGrpcStatus(holder.status());
    return grpc::Status::OK;
  }

 private:
  TokenStore& tokens_;
};

std::string FirstProperty(const grpc::ServerContextBase& ctx, const char* name) {
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (auth == nullptr) return "";
  std::vector<grpc::string_ref> values = auth->FindPropertyValues(name);
  if (values.empty()) return "";
  return std::string(values[0].data(), values[0].size());
}

}  // namespace

Authenticator::Authenticator(std::unique_ptr<TokenStore> tokens,
                             std::string rendezvous_secret)
    : tokens_(std::move(tokens)),
      rendezvous_secret_(std::move(rendezvous_secret)) {}

std::shared_ptr<grpc::AuthMetadataProcessor> Authenticator::MetadataProcessor() {
  if (insecure()) return nullptr;
  return std::make_shared<TokenProcessor>(*tokens_);
}

absl::StatusOr<Caller> Authenticator::Person(
    const grpc::ServerContextBase& ctx) const {
  if (insecure()) return Caller::Unauthenticated();
  const auto& metadata = ctx.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return absl::UnauthenticatedError(kNeedToken);
  if (metadata.count("authorization") > 1) {
    return absl::UnauthenticatedError("send one authorization header, not several");
  }
  absl::StatusOr<absl::string_view> token =
      BearerToken(absl::string_view(it->second.data(), it->second.size()));
  if (!token.ok()) return token.status();
  return ToCaller(tokens_->Lookup(*token));
}

absl::StatusOr<std::string> Authenticator::WorkerIdentity(
    const grpc::ServerContextBase& ctx) const {
  if (insecure()) return std::string();
  std::string name = FirstProperty(ctx, "x509_common_name");
  if (name.empty()) {
    return absl::UnauthenticatedError(
        "a worker must present a certificate signed by the cluster CA: start "
        "it with --join-token (the coordinator's auth/join.token) or "
        "--cert/--key");
  }
  return name;
}

absl::Status Authenticator::CheckJoinToken(absl::string_view token) const {
  if (insecure()) return absl::OkStatus();
  absl::StatusOr<TokenHolder> holder = tokens_->Lookup(token);
  if (!holder.ok() &&
      holder.status().GetPayload(TokenStore::kExpiredPayload).has_value()) {
    return absl::UnauthenticatedError(
        absl::StrCat("join_token: ", holder.status().message()));
  }
  if (!holder.ok() || holder->role != TokenRole::kJoin) {
    return absl::UnauthenticatedError(
        "join_token: not a valid join token; use the one in the "
        "coordinator's auth/join.token (or make one with "
        "`trainctl-coordinator add-user NAME --join`)");
  }
  return absl::OkStatus();
}

std::string Authenticator::RendezvousKey(const std::string& job_id,
                                         int generation) const {
  return pki::HmacSha256Hex(rendezvous_secret_,
                            absl::StrCat(job_id, "/", generation));
}

absl::Status Authenticator::CheckRendezvous(const grpc::ServerContextBase& ctx,
                                            const std::string& job_id,
                                            int generation) const {
  const auto& metadata = ctx.client_metadata();
  auto it = metadata.find(kRendezvousKeyHeader);
  const std::string want = RendezvousKey(job_id, generation);
  if (it == metadata.end() ||
      !pki::ConstantTimeEquals(
          absl::string_view(it->second.data(), it->second.size()), want)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "rendezvous keys of job ", job_id, " generation ", generation,
        " are only for that generation's ranks"));
  }
  return absl::OkStatus();
}

BearerCheck Authenticator::HttpBearerCheck() const {
  if (insecure()) return nullptr;
  TokenStore* tokens = tokens_.get();
  return [tokens](absl::string_view header) -> absl::StatusOr<Caller> {
    absl::StatusOr<absl::string_view> token = BearerToken(header);
    if (!token.ok()) return token.status();
    return ToCaller(tokens->Lookup(*token));
  };
}

}  // namespace trainctl::coordinator::auth
