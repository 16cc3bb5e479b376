#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "trainctl/v1/rank.pb.h"
#include "worker/agent/rank_handle.h"

namespace trainctl::agent {

// The user named `name` (getpwnam) with its groups, for RankCommand.run_as.
// NOT_FOUND naming it when there is no such user.
absl::StatusOr<RankCommand::User> LookUpUser(const std::string& name);

// For ranks run as `user`: the data cache they write becomes theirs
// (created 0700 if missing), and a state directory holding it 0711, so
// they can reach the cache but not list the directory (worker.key stays
// 0600, the agent's). UNAVAILABLE naming the directory on failure.
absl::Status GiveDataCacheToRankUser(const std::string& state_dir,
                                     const std::string& cache_dir,
                                     const RankCommand::User& user);

// One supervised rank process. It runs in its own process group (so a cancel
// reaches anything it spawned) and dies with the agent process
// (PR_SET_PDEATHSIG, armed from a fork thread that lives as long as the
// process, so it does not die with whichever thread called Start). Its
// output lines are valid UTF-8 (SanitizeUtf8), at most 16 KiB each.
// Its stdout/stderr arrive line by line and its report frames (fd 3) one by
// one, each on a reader thread; on_exit runs once, after every line and frame
// was delivered. Callbacks run on internal threads and must be thread-safe.
class RankProcess final : public RankHandle {
 public:
  static absl::StatusOr<std::unique_ptr<RankProcess>> Start(
      const RankCommand& launch, Callbacks callbacks);

  // Hands a standby process its assignment: from now on its output goes to
  // `callbacks`, and `stdin_bytes` are written to it (then stdin closes).
  // FAILED_PRECONDITION when it is not a waiting standby (or it died).
  absl::Status Activate(const std::string& stdin_bytes,
                        Callbacks callbacks) override;
  bool Rebind(Callbacks callbacks) override;
  // Kills the process group if still running and joins every thread.
  ~RankProcess() override;

  // SIGTERM to the group now, SIGKILL after grace_ms if it has not exited.
  // Returns immediately; safe to call more than once and from any thread.
  void Terminate(int64_t grace_ms) override;
  // SIGUSR1 to the rank process now; Terminate(kill_grace_ms) after
  // grace_ms if it has not exited. Safe with Terminate, from any thread.
  void CheckpointAndStop(int64_t grace_ms, int64_t kill_grace_ms) override;
  void RequestRegroup(int generation) override;
  void AbandonGroup(int generation) override;
  bool exited() const override { return exited_.load(); }
  pid_t pid() const override { return pid_; }

 private:
  RankProcess(pid_t pid, Callbacks callbacks)
      : pid_(pid), cb_(std::move(callbacks)) {}
  Callbacks callbacks();
  // SIGUSR2 to the rank process, queued with `value`: a generation to join
  // at a step boundary, or minus one to give up now.
  void QueueRegroupSignal(int value);
  void ReadLines(int fd, const std::string& stream);
  void ReadFrames(int fd);
  void WaitForExit();

  const pid_t pid_;
  std::atomic<bool> exited_{false};
  std::mutex mu_;
  Callbacks cb_;            // GUARDED_BY(mu_)
  std::string last_error_;  // GUARDED_BY(mu_)
  bool exit_taken_ = false; // GUARDED_BY(mu_): on_exit was read from cb_
  int standby_stdin_ = -1;  // GUARDED_BY(mu_): open until Activate
  std::vector<std::thread> readers_;
  std::thread waiter_;
  // Ends the process by the deadlines below: SIGTERM to the group at
  // term_at_, SIGKILL at kill_at_ (started once, by the first stop call).
  void Escalate();
  using Deadline = std::chrono::steady_clock::time_point;
  std::thread killer_;
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;   // GUARDED_BY(stop_mu_): killer_ started
  bool term_sent_ = false;  // GUARDED_BY(stop_mu_)
  bool reaped_ = false;     // GUARDED_BY(stop_mu_): waitpid returned
  Deadline term_at_;        // GUARDED_BY(stop_mu_)
  Deadline kill_at_;        // GUARDED_BY(stop_mu_)
};

}  // namespace trainctl::agent
