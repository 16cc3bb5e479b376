#pragma once

// Who is calling the coordinator, as the authentication layer established it
// (a bearer token for people, a certificate signed by the cluster CA for
// worker agents). Handlers decide with it what the call may touch.

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace trainctl::coordinator::auth {

struct Caller {
  enum class Role { kNone, kUser, kAdmin, kWorker };
  std::string name;  // user name, or the worker's certificate name
  Role role = Role::kNone;

  bool IsAdmin() const { return role == Role::kAdmin; }
  bool IsPerson() const { return role == Role::kUser || role == Role::kAdmin; }
  // Jobs belong to their submitter; admins may touch every job.
  bool MayTouchJobOf(const std::string& owner) const {
    return IsAdmin() || (role == Role::kUser && name == owner);
  }

  // With --insecure there is no authentication: everyone is an admin.
  static Caller Unauthenticated() { return {"", Role::kAdmin}; }
};

// Resolves the value of an HTTP/gRPC "authorization" header ("Bearer TOKEN")
// to a person. UNAUTHENTICATED when the header is missing, malformed or the
// token is unknown. Thread-safe.
using BearerCheck =
    std::function<absl::StatusOr<Caller>(absl::string_view authorization)>;

}  // namespace trainctl::coordinator::auth
