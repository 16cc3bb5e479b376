#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <string>
#include <tuple>
#include <vector>

#include <functional>

#include <grpcpp/security/credentials.h>

#include "common/clock.h"
#include "trainctl/v1/workers.pb.h"
#include "worker/agent/coordinator_connection.h"
#include "worker/agent/gpu_slots.h"
#include "worker/agent/kept_reports.h"
#include "worker/agent/rank_handle.h"

namespace trainctl::agent {

struct AgentOptions {
  std::string coordinator = "127.0.0.1:7070";
  std::string name;             // unique per cluster; defaults to the hostname
  int slots = 1;
  // CUDA device ids given to the slots, one each (--gpus; gpu_slots.h);
  // beyond `slots` they stay unused.
  std::vector<std::string> gpus;
  int cpus = 0;                 // cores this node gives its ranks (0 = all)
  // Registered for the dry run's memory plan (node_memory.h); 0 = unknown.
  int64_t memory_bytes = 0;
  int64_t gpu_memory_bytes = 0;
  std::string collective_host;  // address ranks bind for collectives
  std::string rank_program;     // the binary that runs `rank` (this one)
  int64_t kill_grace_ms = 5'000;
  // Between two attempts to register; the channel's own reconnects are
  // capped at under a second too (agent.cc), so a restarted coordinator
  // sees its workers again within about a second.
  int64_t max_backoff_ms = 1'000;
  // Keep one rank process per free slot started ahead of time, with the
  // libraries loaded, so an assignment starts training without paying for
  // process start-up (about a second for LibTorch's dependencies).
  bool standby_ranks = true;
  int max_buffered_messages = 100'000;
  // Decoded copies of gzip data files, shared by this node's ranks
  // (worker/support/decoded_cache.h); a limit of 0 turns them off.
  std::string data_cache_dir;
  int64_t data_cache_mb = 8192;
  // Heap a standby rank touches while it waits, so the first training step
  // does not page-fault its way to its working set.
  int64_t standby_heap_mb = 256;
  // How to reach the coordinator (worker_credentials.h); null = plaintext.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
  std::string ca_pem;  // passed to the ranks; empty = plaintext
  // Ranks run as this user (--rank-user; the agent must be root), so a job
  // cannot read the agent's key, state directory or join token.
  std::optional<RankCommand::User> rank_user;
  // Told true once registered with the coordinator, false when the stream
  // ends (the worker's health port reports it).
  std::function<void(bool registered)> on_registration;
};

// What the agent talks to: the coordinator, the ranks it starts, the time.
// The worker's composition root passes SystemAgentDeps(); unit tests fakes.
struct AgentDeps {
  std::unique_ptr<CoordinatorConnection> coordinator;
  RankStarter start_rank;
  const Clock* clock = nullptr;  // outlives the agent
};

// gRPC to options.coordinator with options.credentials, RankProcess, and the
// system clock.
AgentDeps SystemAgentDeps(const AgentOptions& options);

// The node agent. Keeps one stream to the coordinator (reconnecting with
// exponential backoff), registers this node's slots, starts one rank process
// per assigned rank, forwards their output and metrics, reports their exits,
// and kills them on cancel. Free slots hold standby rank processes that take
// an assignment at once. Messages produced while disconnected are kept
// (up to max_buffered_messages, oldest dropped first) and sent on reconnect.
// Run() blocks until Stop() is called from another thread.
class Agent {
 public:
  Agent(AgentOptions options, AgentDeps deps);
  ~Agent();

  void Run();
  // Ends Run(): closes the stream and terminates every rank (SIGTERM, then
  // SIGKILL after the grace period), waiting for them to exit.
  void Stop();

 private:

  // Blocks until the channel is connected; false once stopping.
  bool AwaitChannel();
  // One connection's life; returns true when it got as far as registering.
  bool RunSession();
  bool Converse(CoordinatorStream* stream);
  // Queues and flushes; numbers and keeps metrics and log lines (reports_).
  void Send(v1::AgentMessage message);
  // After a registration: the buffer becomes the reports of the re-adopted
  // ranks after their cursors, then their exits, then everything else that
  // is not a report. Reports of other ranks are dropped.
  void ResumeReportsLocked(const v1::Registered& registered);
  void FlushBufferLocked();
  void StartRank(const v1::RankAssignment& assignment);
  // What a rank's output, reports and exit are filed under: `id`.
  RankHandle::Callbacks CallbacksFor(const RankId& id);
  // In-place recovery: files the job's surviving ranks under their new
  // generation and rank (agent_regroup.cc). One that died first is
  // reported as exited under its new identity as well.
  void Regroup(const v1::RegroupRanks& regroup);
  // Ends the job's ranks of that generation and older; with
  // checkpoint_first, asks them to checkpoint and stop within its grace.
  void CancelJob(const v1::CancelRanks& cancel);
  // Retention: removes checkpoint files the coordinator no longer keeps,
  // only inside the job's checkpoint directory.
  void DeleteCheckpoints(const v1::DeleteCheckpoints& request);
  // A dry run's data check: queued (a few at most) for ProbeLoop, which
  // answers them one at a time off the stream's thread.
  void QueueDataProbe(const v1::ProbeDataRequest& request);
  void ProbeLoop();
  void OnRankReport(const RankId& id, const v1::RankReport& report);
  void OnRankExit(const RankId& id, int exit_code, const std::string& error);
  // Destroys finished RankProcess objects outside the lock, then starts
  // standby ranks for the free slots.
  void ReapExited();
  void ForgetUnstarted(const RankId& id);
  void ReplenishStandby();
  absl::StatusOr<std::unique_ptr<RankHandle>> SpawnRank(
      const std::string& stdin_bytes, int threads, bool standby,
      RankHandle::Callbacks callbacks);
  int DefaultThreads() const;
  int ThreadsPerRank(const v1::RankAssignment& assignment) const;

  const AgentOptions options_;
  const std::unique_ptr<CoordinatorConnection> coordinator_;
  const RankStarter start_rank_;
  const Clock& clock_;
  std::atomic<bool> stopping_{false};

  std::mutex mu_;
  std::condition_variable cv_;
  // The session's stream: open_stream_ from its start (Stop() cancels it),
  // stream_ once registered (messages are written to it).
  CoordinatorStream* open_stream_ = nullptr;  // GUARDED_BY(mu_)
  CoordinatorStream* stream_ = nullptr;       // GUARDED_BY(mu_)
  std::deque<v1::AgentMessage> buffer_;                   // GUARDED_BY(mu_)
  std::map<RankId, std::unique_ptr<RankHandle>> ranks_;  // GUARDED_BY(mu_)
  std::deque<std::unique_ptr<RankHandle>> standby_;       // GUARDED_BY(mu_)
  // Held while a standby is being started (ReplenishStandby) and while an
  // assignment looks for one (StartRank): an assignment that arrives
  // during a standby's start waits for it and takes it, rather than
  // starting a second process that would leave the standby without a
  // slot. Taken before mu_, never while holding it.
  std::mutex standby_start_mu_;
  // Latest progress of each running rank, sent with every heartbeat.
  std::map<RankId, v1::RankHeartbeat> progress_;          // GUARDED_BY(mu_)
  // The last exits, repeated at every registration: one reported just as
  // the coordinator died would otherwise be lost with it.
  std::deque<v1::RankStatus> recent_exits_;               // GUARDED_BY(mu_)
  // Ranks whose exit is among recent_exits_, until reaped.
  std::set<RankId> exits_heard_;                          // GUARDED_BY(mu_)
  // Each rank's numbered metrics and log lines, kept (bounded) so that a
  // restarted coordinator gets what it lost again.
  KeptReports reports_;                                   // GUARDED_BY(mu_)
  // The slots' GPUs not held by a rank, and those held.
  GpuPool free_gpus_;                                     // GUARDED_BY(mu_)
  std::map<RankId, std::string> rank_gpus_;               // GUARDED_BY(mu_)
  std::mutex write_mu_;  // serializes stream writes

  std::mutex probe_mu_;
  std::condition_variable probe_cv_;
  std::deque<v1::ProbeDataRequest> probes_;  // GUARDED_BY(probe_mu_)
  std::thread probe_thread_;
};

}  // namespace trainctl::agent
