#pragma once

// A rank as the agent sees it: started from a command, told its assignment,
// terminated. RankProcess (rank_process.h) is the real one, a supervised
// child process; the agent's unit tests start fakes instead.

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainctl/v1/rank.pb.h"

namespace trainctl::agent {

// What to start: the program, its arguments, environment changes, and the
// bytes to feed its stdin (then closed). A standby process gets no bytes and
// keeps stdin open until Activate.
struct RankCommand {
  std::string program;
  std::vector<std::string> args;
  std::map<std::string, std::string> env;
  // Variables of the agent's environment the process does not inherit.
  std::vector<std::string> env_remove;
  std::string stdin_bytes;
  bool standby = false;
  // Run as this user instead of the agent's (needs root): the rank then
  // cannot read the agent's state directory, key or join token.
  struct User {
    uid_t uid = 0;
    gid_t gid = 0;
    std::vector<gid_t> groups;
  };
  std::optional<User> run_as;
};

class RankHandle {
 public:
  struct Callbacks {
    std::function<void(const std::string& stream, const std::string& line)>
        on_line;
    // Metrics, checkpoints and progress the rank reports (RankReport).
    std::function<void(const v1::RankReport& report)> on_report;
    // exit_code is -N when the process was killed by signal N; last_error is
    // its last non-empty stderr line. Runs once, after every line and report.
    std::function<void(int exit_code, const std::string& last_error)> on_exit;
  };

  virtual ~RankHandle() = default;
  // Hands a standby its assignment: from now on its output goes to
  // `callbacks`. FAILED_PRECONDITION when it is not a waiting standby.
  virtual absl::Status Activate(const std::string& stdin_bytes,
                                Callbacks callbacks) = 0;
  // In-place recovery renumbered the rank: from now on its output, reports
  // and exit go to `callbacks`. False when its exit was already handed to
  // the old ones (it died first).
  virtual bool Rebind(Callbacks callbacks) = 0;
  // Asks the rank to end (SIGTERM), forcing it after grace_ms. Returns at
  // once; on_exit follows on another thread.
  virtual void Terminate(int64_t grace_ms) = 0;
  // Asks the rank to checkpoint and stop (SIGUSR1 to the rank process
  // alone: what it spawned keeps the signal's default action). If it has
  // not exited after grace_ms, Terminate(kill_grace_ms) follows. A later
  // Terminate cuts the grace short. Returns at once.
  virtual void CheckpointAndStop(int64_t grace_ms, int64_t kill_grace_ms) = 0;
  // Asks the rank to leave its group at the end of its current step and
  // join `generation` in place (SIGUSR2 queued with the generation, to the
  // rank process alone). Returns at once; nothing when it has exited.
  virtual void RequestRegroup(int generation) = 0;
  // The coordinator recovered `generation` in place without waiting for
  // this rank's collectives to fail: make it give up that group now
  // (SIGUSR2 queued with minus the generation). Its peer may be cut off
  // without a TCP reset, which a collective notices only at its timeout.
  // Returns at once; nothing when it has exited.
  virtual void AbandonGroup(int generation) = 0;
  virtual bool exited() const = 0;
  virtual pid_t pid() const = 0;
};

using RankStarter = std::function<absl::StatusOr<std::unique_ptr<RankHandle>>(
    const RankCommand& command, RankHandle::Callbacks callbacks)>;

}  // namespace trainctl::agent
