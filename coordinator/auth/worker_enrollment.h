#pragma once

// Which key each worker name was certified for, and with how many slots
// (auth/workers: "NAME SHA256(public key) SLOTS" per line). A join token lets a node obtain a
// certificate for its name once; joining again under that name is allowed
// only with the same key (renewal). So one node holding the join token
// cannot take over another node's name while it is down. An admin frees a
// name with `trainctl-coordinator forget-worker NAME` (a node that lost its
// key).

#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace trainctl::coordinator::auth {

class WorkerEnrollment {
 public:
  explicit WorkerEnrollment(std::string path) : path_(std::move(path)) {}

  // OK, recording the name and the slots it will register with, when it is
  // new or was certified for this key. PERMISSION_DENIED when it was
  // certified for another key.
  absl::Status Admit(const std::string& name, const std::string& fingerprint,
                     int slots);
  // The slots `name` joined with (0 for a record older than slots); a
  // registration may not claim more. NOT_FOUND for a name never joined.
  absl::StatusOr<int> EnrolledSlots(const std::string& name);

 private:
  const std::string path_;
  std::mutex mu_;
};

// Removes `name` from `state_dir`'s auth/workers; NOT_FOUND if absent.
absl::Status ForgetWorker(const std::string& state_dir, const std::string& name);

}  // namespace trainctl::coordinator::auth
