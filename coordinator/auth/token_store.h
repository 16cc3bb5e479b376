#pragma once

// The coordinator's view of auth/tokens: token digest -> (role, name).
// Rereads the file when it changes (checked on each lookup by its mtime,
// size and inode), so adding or revoking a user needs no restart.

#include <mutex>
#include <string>
#include <unordered_map>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "coordinator/auth/cluster_files.h"

namespace trainctl::coordinator::auth {

struct TokenHolder {
  TokenRole role = TokenRole::kUser;
  std::string name;
  int64_t expires_unix_s = 0;  // 0: never
};

class TokenStore {
 public:
  // Set (empty) on the status of a known token past its expiry, so callers
  // can say "expired" rather than "unknown".
  static constexpr char kExpiredPayload[] = "trainctl/token-expired";

  explicit TokenStore(std::string path) : path_(std::move(path)) {}

  // UNAUTHENTICATED for an unknown or expired token (the message never
  // repeats it); UNAVAILABLE when the file cannot be read.
  absl::StatusOr<TokenHolder> Lookup(absl::string_view token);

 private:
  absl::Status ReloadIfChangedLocked();

  const std::string path_;
  std::mutex mu_;
  std::unordered_map<std::string, TokenHolder> by_digest_;  // GUARDED_BY(mu_)
  struct Stamp {
    int64_t mtime_ns = -1, size = -1, inode = -1;
    bool operator==(const Stamp& o) const {
      return mtime_ns == o.mtime_ns && size == o.size && inode == o.inode;
    }
  } loaded_;  // GUARDED_BY(mu_)
};

}  // namespace trainctl::coordinator::auth
