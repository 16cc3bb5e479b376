#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
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
class EventHub {
 public:
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
  // event was published and returned.
  std::vector<v1::JobEvent> WaitForEvents(
      const std::string& job_id, int64_t from_seq, int64_t timeout_ms,
      bool* closed, size_t max_events = std::numeric_limits<size_t>::max());

  // The seq of the job's last published event; 0 for none (or no such job).
  int64_t PublishedSeq(const std::string& job_id);

  // Seeds the job's history from the durable store at startup, keeping the
  // stored seq numbers, all published; `events` must be seq 1..N in order
  // (DATA_LOSS otherwise). Replaces whatever the hub held for the job.
  absl::Status Restore(const std::string& job_id,
                       std::vector<v1::JobEvent> events, bool closed);

  // Marks the job's history complete: watchers finish after its last event.
  void Close(const std::string& job_id);

  // Drops a deleted job's history; its watchers end as after Close.
  void Forget(const std::string& job_id);

  // Wakes every waiter (used at shutdown).
  void WakeAll();

 private:
  struct JobLog {
    std::vector<v1::JobEvent> events;
    int64_t published = 0;  // events[0, published) are visible
    bool closed = false;
    // Its watchers wait here (with mu_). Shared with them, so a log that
    // Forget drops stays valid until they have woken and left.
    std::condition_variable changed;
  };
  // The job's log, created on first use.
  JobLog& LogLocked(const std::string& job_id);

  std::mutex mu_;
  std::map<std::string, std::shared_ptr<JobLog>> logs_;  // GUARDED_BY(mu_)
};

}  // namespace trainctl::coordinator
