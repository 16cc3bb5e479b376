#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "coordinator/agent_link.h"
#include "coordinator/scheduler.h"
#include "trainctl/v1/jobs.pb.h"
#include "trainctl/v1/workers.pb.h"

namespace trainctl::coordinator {

// The most slots one worker may register: beyond any machine's cores or
// GPUs, and small enough that the scheduler's slot sums cannot overflow.
inline constexpr int kMaxSlotsPerWorker = 1024;
// A worker's name and collective host: host names are at most 253 bytes.
inline constexpr size_t kMaxWorkerStringBytes = 255;

// INVALID_ARGUMENT naming `field` unless 1 <= slots <= kMaxSlotsPerWorker.
absl::Status CheckSlots(const char* field, int64_t slots);


// Which agents are connected, what slots they have, which ranks occupy them,
// and whether their lease is still fresh, on the times its caller gives.
// Not thread-safe: JobCore owns it.
class WorkerRegistry {
 public:
  // Identifies one rank of one job generation occupying a slot.
  struct RankKey {
    std::string job_id;
    int generation = 0;
    int rank = 0;
    bool operator<(const RankKey& o) const {
      if (job_id != o.job_id) return job_id < o.job_id;
      if (generation != o.generation) return generation < o.generation;
      return rank < o.rank;
    }
  };

  struct Worker {
    v1::RegisterRequest info;
    std::shared_ptr<AgentLink> link;
    int64_t last_heartbeat_ms = 0;
    std::set<RankKey> ranks;
    std::set<RankKey> on_gpu_slots;  // those of `ranks` in a slot with a GPU
  };

  explicit WorkerRegistry(int64_t lease_ms) : lease_ms_(lease_ms) {}

  // ALREADY_EXISTS when a live agent holds the name; INVALID_ARGUMENT on an
  // empty name, a name or collective host that is too long or holds control
  // characters, a slot count out of range, or more GPU slots than slots.
  absl::Status Register(const v1::RegisterRequest& info,
                        std::shared_ptr<AgentLink> link, int64_t now_unix_ms);
  // Removes the worker if `link` is still its link (a stale stream closing
  // after a reconnect must not remove the new one). Returns the ranks it held.
  std::set<RankKey> Remove(const std::string& name, const AgentLink* link);
  void Heartbeat(const std::string& name, int64_t now_unix_ms);
  // Workers whose lease ran out by `now`; the caller removes them.
  std::vector<std::string> Expired(int64_t now) const;

  // `gpu_slot`: the rank takes one of the worker's slots that have a GPU.
  void Occupy(const std::string& name, const RankKey& key, bool gpu_slot);
  void Release(const std::string& name, const RankKey& key);
  bool Holds(const std::string& name, const RankKey& key) const;

  const Worker* Find(const std::string& name) const;
  std::vector<WorkerSlots> FreeSlots() const;
  std::vector<v1::WorkerInfo> Describe() const;

 private:
  const int64_t lease_ms_;
  std::map<std::string, Worker> workers_;
};

}  // namespace trainctl::coordinator
