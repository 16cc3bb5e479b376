#pragma once

// The cluster's secrets in the coordinator's state directory:
//
//   tls/ca.crt, tls/ca.key          the cluster CA (signs the rest)
//   tls/server.crt, tls/server.key  the coordinator's gRPC and HTTP ports
//   auth/tokens                     "ROLE NAME SHA256(token)" per line
//   auth/admin.token                the first admin's token (0600)
//   auth/join.token                 the token workers exchange for a cert
//   auth/rendezvous.key             derives each job generation's key
//
// Keys and tokens are 0600 in 0700 directories. Only digests of tokens are
// in auth/tokens, so reading it does not let anyone in.

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace trainctl::coordinator::auth {

struct ClusterFiles {
  explicit ClusterFiles(const std::string& state_dir);
  std::string ca_cert, ca_key, server_cert, server_key;
  std::string tokens, admin_token, join_token, rendezvous_key;
};

struct InitReport {
  std::vector<std::string> created;  // paths written by this call
  std::string admin_token;           // as stored in auth/admin.token
  std::string join_token;
};

// Creates whatever of the files above is missing; an existing CA, server
// certificate or token is kept (so init is safe to run twice). The server
// certificate names `server_names` plus localhost, 127.0.0.1, ::1 and this
// host's name; `--san` adds names a new certificate gets only when the old
// one is removed first (the report says so via `created`).
absl::StatusOr<InitReport> InitCluster(const std::string& state_dir,
                                       const std::vector<std::string>& server_names);

enum class TokenRole { kUser, kAdmin, kJoin };
const char* TokenRoleName(TokenRole role);

// Adds a token for `name` with `role` to auth/tokens and returns it; the
// token itself is stored nowhere. Names: 1-64 of [A-Za-z0-9._@-]. With
// expires_unix_s > 0 the token is refused from that time on (its line
// ends "expires=UNIX_SECONDS").
absl::StatusOr<std::string> AddToken(const std::string& state_dir,
                                     TokenRole role, const std::string& name,
                                     int64_t expires_unix_s = 0);

// "90s", "30m", "2h", "7d" (a whole number and a unit) in seconds;
// INVALID_ARGUMENT naming `flag` and the value otherwise.
absl::StatusOr<int64_t> ParseTokenLifetime(const std::string& flag,
                                           const std::string& text);

// Validates a user or worker name (the rule above); errors name `what`.
absl::Status CheckName(const std::string& what, const std::string& name);

}  // namespace trainctl::coordinator::auth
