#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainctl/v1/jobs.pb.h"

namespace trainctl::coordinator {

// Each job's ordered event history (state changes, metrics, log lines) and
// the fan-out to watchers. Every event gets the next per-job sequence number
// starting at 1, so a watcher that lost its stream resumes from the last seq
// it saw without gaps or duplicates.
//
// Watchers see an event only once it is published, i.e. durable in the
// store: after a crash the coordinator reuses the seq of any event that
// never reached the disk, so an event shown before it was durable could be
// replaced by a different one under the same seq, and a resuming watcher
// would skip the new one. Thread-safe; WaitForEvents blocks the calling
// thread for at most its timeout. Each job has its own wait queue: a
// publish wakes that job's watchers only (with one queue for all, every
// event woke every watcher of the cluster: 100 watchers at 3,000 events/s
// spent most of the coordinator's CPU in futex wake-ups).
//
// Memory is bounded: given a reader of the durable store, the hub keeps
// only each job's newest published events (up to `tail_bytes` of them) and
// its unpublished ones, and nothing of a finished job; a watcher that asks
// for older ones gets them from the store, which holds every published
// event. Without a reader (tests, a store-less server) it keeps them all.
class EventHub {
 public:
  // Stored events of a job with seq >= from_seq, in order, at most
  // max_events; a job the store does not hold reads as none.
  using StoreReader = std::function<absl::StatusOr<std::vector<v1::JobEvent>>(
      const std::string& job_id, int64_t from_seq, size_t max_events)>;
  static constexpr size_t kDefaultTailBytes = 256 * 1024;

  EventHub() = default;
  EventHub(StoreReader reader, size_t tail_bytes)
      : reader_(std::move(reader)), tail_bytes_(tail_bytes) {}

  // Stamps seq and job_id onto the event and stores it, unpublished;
  // returns the seq.
  int64_t Append(const std::string& job_id, v1::JobEvent event);

  // Makes the job's events up to `seq` visible to watchers (they are
  // durable now). Never lowers what is visible.
  void Publish(const std::string& job_id, int64_t seq);

  // Published events of the job with seq >= from_seq, at most
  // `max_events` of them (a watcher catching up on a long job copies a
  // bounded batch per call, not its whole history under the lock); waits
  // up to timeout_ms for at least one when none is there yet. `closed` is
  // set once the job's log was closed (its final state recorded) and every
  // event was published and returned. An error only when the store cannot
  // be read for events the hub no longer holds.
  absl::StatusOr<std::vector<v1::JobEvent>> WaitForEvents(
      const std::string& job_id, int64_t from_seq, int64_t timeout_ms,
      bool* closed, size_t max_events = std::numeric_limits<size_t>::max());

  // The seq of the job's last published event; 0 for none (or no such job).
  int64_t PublishedSeq(const std::string& job_id);

  // Seeds the job's history from the durable store at startup: the job has
  // events 1..last_seq, all published, and `tail` holds the newest of them
  // in order (seq last_seq - tail.size() + 1 .. last_seq; DATA_LOSS
  // otherwise; without a reader the whole history). Replaces whatever the
  // hub held for the job.
  absl::Status Restore(const std::string& job_id, int64_t last_seq,
                       std::vector<v1::JobEvent> tail, bool closed);

  // Bytes of events held in memory, over all jobs.
  size_t HeldBytes();
  // How many bytes of a job's newest events the hub holds (all of them
  // without a reader): what Restore needs of each job's history.
  size_t tail_bytes() const;

  // Marks the job's history complete: watchers finish after its last event.
  void Close(const std::string& job_id);

  // Drops a deleted job's history; its watchers end as after Close.
  void Forget(const std::string& job_id);

  // Wakes every waiter (used at shutdown).
  void WakeAll();

  // Every job's state changes as they are published, in that order: the
  // cluster-wide feed behind `trainctl list -w`. Bounded: it keeps the
  // newest kStateChangesKept.
  struct StateChange {
    int64_t feed_seq = 0;  // 1, 2, ... over all jobs, since this process started
    std::string job_id;
    v1::Transition transition;
  };
  static constexpr size_t kStateChangesKept = 4096;
  // The feed's newest seq (0: none yet); a new watcher reads after it.
  int64_t StateChangeSeq();
  // The changes after `after_seq`, waiting up to timeout_ms for one.
  // `*missed` is set when some were already dropped from the feed (a
  // watcher that fell kStateChangesKept behind): it should list again.
  std::vector<StateChange> WaitForStateChanges(int64_t after_seq,
                                               int64_t timeout_ms, bool* missed);

 private:
  struct JobLog {
    std::deque<v1::JobEvent> events;  // seq first_seq .. first_seq+size-1
    int64_t first_seq = 1;            // older ones are only in the store
    int64_t published = 0;            // seq 1..published are visible
    size_t bytes = 0;                 // serialized size of `events`
    bool closed = false;
    // Its watchers wait here (with mu_). Shared with them, so a log that
    // Forget drops stays valid until they have woken and left.
    std::condition_variable changed;
  };
  // The job's log, created on first use.
  JobLog& LogLocked(const std::string& job_id);
  // Drops published events beyond the tail budget (all of them once the
  // log is closed and published), when a reader can serve them instead.
  void TrimLocked(JobLog& log);

  const StoreReader reader_;
  const size_t tail_bytes_ = 0;
  std::mutex mu_;
  size_t held_bytes_ = 0;  // GUARDED_BY(mu_)
  std::map<std::string, std::shared_ptr<JobLog>> logs_;  // GUARDED_BY(mu_)
  std::deque<StateChange> state_changes_;  // GUARDED_BY(mu_)
  int64_t state_change_seq_ = 0;           // GUARDED_BY(mu_)
  // Only `list -w` watchers wait here, so a publish wakes no job watcher.
  std::condition_variable state_changed_;
};

}  // namespace trainctl::coordinator
