#pragma once

// The numbered metrics, log lines and checkpoint reports of each rank, kept
// so that a restarted coordinator gets again what it lost (it says up to
// which seq it has, per rank, when the agent registers). Bounded per rank and in total bytes, and
// a rank's are freed once its exit has reached the coordinator.
// Not thread-safe: the agent calls it under its lock.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "trainctl/v1/workers.pb.h"

namespace trainctl::agent {

using RankId = std::tuple<std::string, int, int>;  // job, generation, rank

// What the agent keeps: per rank, and in all (a log line is up to 16 KiB).
inline constexpr size_t kKeptReportsPerRank = 20'000;
inline constexpr size_t kKeptReportsBytes = size_t{64} << 20;

class KeptReports {
 public:
  KeptReports(size_t max_per_rank, size_t max_total_bytes)
      : max_per_rank_(max_per_rank), max_total_bytes_(max_total_bytes) {}

  // Numbers a metrics, log or checkpoint message of rank `id` (sets its
  // seq), keeps a copy, and drops the oldest kept reports beyond the bounds.
  void Number(const RankId& id, v1::AgentMessage* message);
  // The kept reports of `id` after `last_seq`, in order; *missing is true
  // when some after last_seq were dropped already.
  std::vector<v1::AgentMessage> After(const RankId& id, int64_t last_seq,
                                      bool* missing) const;
  // The rank's exit was written to the coordinator. There is no ack: its
  // reports are freed by the second ForgetDelivered() after this (the agent
  // calls it every heartbeat), so a coordinator that dies with the exit in
  // flight can still ask for them.
  void ExitDelivered(const RankId& id) { delivered_.insert(id); }
  void ForgetDelivered();
  // The session ended: what it was sent is not known to have arrived (the
  // next registration's RetainOnly decides).
  void SessionEnded() {
    delivered_.clear();
    aged_.clear();
  }
  // Drops every rank's reports but those of `keep`.
  void RetainOnly(const std::set<RankId>& keep);

  size_t bytes() const { return total_bytes_; }
  size_t ranks() const { return ranks_.size(); }
  size_t count(const RankId& id) const;

 private:
  struct Rank {
    int64_t next_seq = 1;
    size_t bytes = 0;
    std::deque<v1::AgentMessage> kept;  // in seq order
  };
  void DropOldest(Rank& rank);
  void EnforceTotal();

  const size_t max_per_rank_;
  const size_t max_total_bytes_;
  size_t total_bytes_ = 0;
  std::map<RankId, Rank> ranks_;
  std::set<RankId> delivered_;  // exits written since the last tick
  std::set<RankId> aged_;       // written before it: freed at the next
};

}  // namespace trainctl::agent
