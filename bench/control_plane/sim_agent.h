#pragma once

// A simulated worker agent: the real Workers.Connect protocol over its own
// mTLS connection, with ranks that never run a process. Each rank reports
// one metric point and one log line per second (stamped with the steady
// clock, so a watcher in this process can tell how long delivery took),
// its progress rides the agent's heartbeat, and it exits 0 when its job's
// time is up. After the stream breaks the agent reconnects at once and
// registers with the ranks it still runs, as trainctl-worker does.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "trainctl/v1/workers.grpc.pb.h"

namespace trainctl::bench {

// Microseconds on the steady clock (shared by every thread of the process).
int64_t SteadyMicros();

// How many times, over all agents, a heartbeat or report was due a whole
// interval or more before the ticker came to it (the simulator fell behind).
int64_t LateTicks();

// What the simulated agents tell the rest of the benchmark.
struct SimEvents {
  // Every rank of `world_size` reports one exit per job: the job is done
  // when all have.
  std::function<void(const std::string& job_id, int world_size)> rank_exited;
};

struct SimAgentOptions {
  std::string name;
  int slots = 8;
  // A job's ranks exit 0.5-1.5 x this long after they were assigned (the
  // same draw for all of them, from the job id).
  int64_t job_seconds = 30;
  // Where in each second of the steady clock this agent heartbeats and
  // reports, so that N agents spread them over the second as nodes started
  // at different times do. (Counted from the stream's opening instead, all
  // heartbeats came at once: the ticker opens every stream in one sweep.)
  int64_t phase_us = 0;
};

class SimAgent {
 public:
  SimAgent(SimAgentOptions options, std::shared_ptr<grpc::Channel> channel,
           const SimEvents* events);
  ~SimAgent();

  // Opens the stream (and registers) when none is open and the backoff
  // after the last one has passed; then sends what is due at `now_us`: a
  // heartbeat every heartbeat interval and each rank's report every second.
  // `exits_allowed` false holds every rank past its end (a restart is being
  // measured and no job may end meanwhile).
  void Tick(int64_t now_us, bool exits_allowed);
  // Ends the stream for good (at the benchmark's end).
  void Shutdown();

  // When the latest `registered` arrived (SteadyMicros), 0 before the first.
  int64_t registered_at_us() const { return registered_at_us_.load(); }
  int running_ranks() const;

 private:
  class Stream;
  struct Rank {
    std::string job_id;
    int generation = 0, rank = 0, world_size = 0;
    int64_t step = 0, seq = 0, ends_at_us = 0;
  };
  int64_t JobLengthUs(const std::string& job_id) const;
  void OnMessage(const v1::CoordinatorMessage& message);
  void OnStreamDone(Stream* stream);
  v1::AgentMessage Registration() const;  // under mu_
  bool SendLocked(const v1::AgentMessage& message);

  const SimAgentOptions options_;
  const std::shared_ptr<grpc::Channel> channel_;
  const std::unique_ptr<v1::Workers::Stub> stub_;
  const SimEvents* const events_;

  mutable std::mutex mu_;
  Stream* stream_ = nullptr;       // GUARDED_BY(mu_); owned by gRPC until done
  int open_streams_ = 0;           // GUARDED_BY(mu_); for Shutdown
  bool shut_down_ = false;         // GUARDED_BY(mu_)
  int64_t reconnect_at_us_ = 0;    // GUARDED_BY(mu_)
  int64_t heartbeat_interval_us_ = 1'000'000;  // GUARDED_BY(mu_)
  int64_t next_heartbeat_us_ = 0;  // GUARDED_BY(mu_)
  int64_t next_report_us_ = 0;     // GUARDED_BY(mu_)
  std::vector<Rank> ranks_;        // GUARDED_BY(mu_)
  std::atomic<int64_t> registered_at_us_{0};
};

}  // namespace trainctl::bench
