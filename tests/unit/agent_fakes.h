#pragma once

// What the agent's unit tests give it instead of a coordinator and rank
// processes: the test plays the coordinator's end of each stream
// (FakeCoordinator) and makes the ranks it started report and exit
// (FakeRanks). Every wait has a timeout.

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "trainctl/v1/rank.pb.h"
#include "worker/agent/coordinator_connection.h"
#include "worker/agent/rank_handle.h"

namespace trainctl::agent::testing {

inline constexpr auto kWait = std::chrono::seconds(10);

// The coordinator's end of one session.
class FakeSession {
 public:
  // To the agent.
  void Send(v1::CoordinatorMessage message);
  // Ends the stream as a dying coordinator would: the agent's Read and
  // Write fail from now on.
  void Drop(absl::Status why = absl::UnavailableError("coordinator gone"));
  // The agent's next message, or nothing within kWait.
  std::optional<v1::AgentMessage> Next();
  // Skips heartbeats (the agent sends them on its own schedule).
  std::optional<v1::AgentMessage> NextNotHeartbeat();
  bool ended();
  // Whether the agent has read every message sent to it, waiting up to
  // `wait` for that.
  bool AwaitDrained(std::chrono::milliseconds wait);

  // The agent's side (FakeStream).
  bool AgentWrite(const v1::AgentMessage& message);
  bool AgentRead(v1::CoordinatorMessage* message);
  absl::Status AgentFinish();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::CoordinatorMessage> to_agent_;
  std::deque<v1::AgentMessage> from_agent_;
  std::optional<absl::Status> ended_;
};

class FakeCoordinator {
 public:
  // While unreachable, the agent's WaitForConnected times out.
  void SetReachable(bool reachable);
  // The next stream the agent opens, or null within kWait.
  std::shared_ptr<FakeSession> Accept();
  // Accept, read the agent's Register, answer Registered.
  std::shared_ptr<FakeSession> AcceptAndRegister(
      v1::RegisterRequest* hello = nullptr,
      std::vector<v1::RankCursor> cursors = {},
      int64_t heartbeat_interval_ms = 3'600'000);
  // Until the agent has waited for the channel `n` times in all.
  bool AwaitWaits(int n);
  int streams_opened();

  // An end for the agent to own; this object must outlive it.
  std::unique_ptr<CoordinatorConnection> Connection();

  // The agent's side (FakeConnection).
  bool AgentWaitForConnected(std::chrono::milliseconds timeout);
  std::unique_ptr<CoordinatorStream> AgentConnect();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool reachable_ = true;
  int waits_ = 0;
  int opened_ = 0;
  std::deque<std::shared_ptr<FakeSession>> pending_;
};

// One started rank as the test sees it.
class FakeRank {
 public:
  FakeRank(RankCommand command, RankHandle::Callbacks callbacks, pid_t pid)
      : command_(std::move(command)), callbacks_(std::move(callbacks)),
        pid_(pid) {}

  const RankCommand& command() const { return command_; }
  // The assignment the agent gave it (its stdin frame), parsed.
  v1::RankLaunch launch() const;
  pid_t pid() const { return pid_; }
  void Line(const std::string& stream, const std::string& text);
  void Report(const v1::RankReport& report);
  void Metric(int64_t step, double loss);
  void Exit(int code, const std::string& last_error = "");
  // The process is gone, its exit not yet delivered (RankProcess's waiter
  // thread between the two); Exit() delivers it.
  void Vanish();
  bool terminated();
  bool exited();
  // The grace period it was asked to checkpoint and stop within; -1 when
  // it was not asked.
  int64_t stop_grace_ms();
  // How often it was asked to regroup at its next step boundary, and into
  // which generation last.
  int regroup_requests();
  int regroup_generation();
  // The generation it was last told to give up (0: none).
  int abandoned_generation();

  // The agent's side (FakeRankHandle).
  absl::Status Activate(const std::string& stdin_bytes,
                        RankHandle::Callbacks callbacks);
  void Terminate();
  void CheckpointAndStop(int64_t grace_ms);
  bool Rebind(RankHandle::Callbacks callbacks);
  void RequestRegroup(int generation);
  void AbandonGroup(int generation);

 private:
  RankCommand command_;
  std::mutex mu_;
  RankHandle::Callbacks callbacks_;  // GUARDED_BY(mu_)
  const pid_t pid_;
  bool terminated_ = false;          // GUARDED_BY(mu_)
  int64_t stop_grace_ms_ = -1;       // GUARDED_BY(mu_)
  int regroup_requests_ = 0;         // GUARDED_BY(mu_)
  int regroup_generation_ = 0;       // GUARDED_BY(mu_)
  int abandoned_generation_ = 0;     // GUARDED_BY(mu_)
  bool exited_ = false;              // GUARDED_BY(mu_)
  bool exit_delivered_ = false;      // GUARDED_BY(mu_)
};

// Starts FakeRanks: a terminated one exits with -15 on a thread of its own,
// as a real rank's exit arrives from its waiter thread.
class FakeRanks {
 public:
  RankStarter Starter();
  // The `n`th rank started (0-based), waiting up to kWait for it.
  std::shared_ptr<FakeRank> Started(size_t n);
  size_t count();
  // While held, a standby's start blocks before it is counted (as a slow
  // fork and exec would); AwaitHeldStandby waits up to kWait for one.
  void HoldStandbyStarts(bool hold);
  bool AwaitHeldStandby();

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<FakeRank>> started_;
  pid_t next_pid_ = 1000;
  bool hold_standbys_ = false;  // GUARDED_BY(mu_)
  int standbys_held_ = 0;       // GUARDED_BY(mu_): blocked in the starter now
};

}  // namespace trainctl::agent::testing
