#pragma once

// How a worker proves who it is to the coordinator: a client certificate
// signed by the cluster CA and named after the worker. An operator may
// hand one over (--cert/--key); otherwise the worker trades the cluster's
// join token for one on its first start and keeps it in its state
// directory, so later starts need no token.

#include <memory>
#include <string>

#include <grpcpp/security/credentials.h>

#include "absl/status/statusor.h"

namespace trainctl::agent {

struct WorkerTlsOptions {
  bool insecure = false;        // plaintext, no certificate (demo only)
  std::string ca_cert_file;     // the cluster CA (the coordinator's tls/ca.crt)
  std::string cert_file, key_file;  // an operator-made certificate
  std::string join_token;       // else: trade this for a certificate
  std::string state_dir;        // where a joined certificate is kept
  int64_t join_wait_ms = 120'000;  // keep trying an unreachable coordinator
  // The slots the worker registers with: a join records them, and the
  // coordinator refuses a registration claiming more than its join did.
  int slots = 1;
};

struct WorkerCredentials {
  std::shared_ptr<grpc::ChannelCredentials> channel;
  std::string ca_pem;  // for the ranks' Rendezvous calls; empty if insecure
};

// The credentials for worker `name` talking to `coordinator`. Errors name the
// flag or file at fault and what to do; a refused join token is not retried.
absl::StatusOr<WorkerCredentials> ObtainCredentials(
    const WorkerTlsOptions& options, const std::string& coordinator,
    const std::string& name);

}  // namespace trainctl::agent
