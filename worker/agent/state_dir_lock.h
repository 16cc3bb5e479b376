#pragma once

// One worker per state directory. Two workers sharing one overwrote each
// other's certificate (the second join replaced the first's), so a worker
// holds an flock on STATE_DIR/worker.lock for its whole life and a second
// one is refused, told the directory and the holder's pid.

#include <string>

#include "absl/status/statusor.h"

namespace trainctl::agent {

class StateDirLock {
 public:
  // Creates `dir` (0700) if needed and locks it. FAILED_PRECONDITION naming
  // the directory and the other worker's pid when one holds it already.
  static absl::StatusOr<StateDirLock> Acquire(const std::string& dir);

  StateDirLock(StateDirLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  StateDirLock& operator=(StateDirLock&& other) noexcept;
  StateDirLock(const StateDirLock&) = delete;
  StateDirLock& operator=(const StateDirLock&) = delete;
  ~StateDirLock();  // releases the lock

 private:
  explicit StateDirLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// The default state directory of worker `name`, one per name so that two
// workers on one host do not share one: $XDG_STATE_HOME/trainctl-worker/NAME,
// else ~/.local/state/trainctl-worker/NAME ('/' in a name becomes '_').
std::string DefaultWorkerStateDir(const std::string& name);

}  // namespace trainctl::agent
