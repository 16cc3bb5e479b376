#pragma once

// Decides who a gRPC call comes from. With TLS, people present a bearer
// token on every call (checked by the server's AuthMetadataProcessor before
// any handler runs, so a wrong token never reaches one, and resolved again
// per call by Person()), worker agents a client
// certificate signed by the cluster CA, and rank processes the key of their
// job generation. With --insecure, nobody is authenticated and everyone is
// an admin; only the rendezvous keys are still checked, so one job's ranks
// never touch another's keys.

#include <memory>
#include <string>

#include <grpcpp/security/auth_metadata_processor.h>
#include <grpcpp/server_context.h>

#include "absl/status/statusor.h"
#include "coordinator/auth/caller.h"
#include "coordinator/auth/token_store.h"

namespace trainctl::coordinator::auth {

// The metadata key a rank sends its generation's rendezvous key in.
inline constexpr char kRendezvousKeyHeader[] = "x-trainctl-rendezvous-key";

class Authenticator {
 public:
  // `tokens` null means --insecure. `rendezvous_secret` derives the keys.
  Authenticator(std::unique_ptr<TokenStore> tokens,
                std::string rendezvous_secret);

  bool insecure() const { return tokens_ == nullptr; }

  // For the secure server credentials; null when insecure.
  std::shared_ptr<grpc::AuthMetadataProcessor> MetadataProcessor();

  // The person calling. UNAUTHENTICATED without a token; PERMISSION_DENIED
  // for a join token.
  absl::StatusOr<Caller> Person(const grpc::ServerContextBase& ctx) const;
  // The name in the caller's verified client certificate; "" when insecure
  // (any name goes). UNAUTHENTICATED without a certificate.
  absl::StatusOr<std::string> WorkerIdentity(const grpc::ServerContextBase& ctx) const;
  // OK for a join token (the Join RPC carries it in its request).
  absl::Status CheckJoinToken(absl::string_view token) const;

  // The key the ranks of (job, generation) present, and its check.
  std::string RendezvousKey(const std::string& job_id, int generation) const;
  absl::Status CheckRendezvous(const grpc::ServerContextBase& ctx,
                               const std::string& job_id, int generation) const;

  // For the HTTP port: "Bearer TOKEN" -> person (admin when insecure).
  BearerCheck HttpBearerCheck() const;

 private:
  std::unique_ptr<TokenStore> tokens_;
  const std::string rendezvous_secret_;
};

}  // namespace trainctl::coordinator::auth
