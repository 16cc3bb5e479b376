#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "trainctl/v1/jobs.pb.h"

namespace trainctl::coordinator {

// Each job's ordered event history (state changes, metrics, log lines) and
// the fan-out to watchers. Every event gets the next per-job sequence number
// starting at 1, so a watcher that lost its stream resumes from the last seq
// it saw without gaps or duplicates. Thread-safe; WaitForEvents blocks the
// calling thread for at most its timeout.
class EventHub {
 public:
  // Stamps seq and job_id onto the event and stores it; returns the seq.
  int64_t Append(const std::string& job_id, v1::JobEvent event);

  // Events of the job with seq >= from_seq; waits up to timeout_ms for at
  // least one when none is there yet. `closed` is set once the job's log was
  // closed (its final state recorded) and every event was returned.
  std::vector<v1::JobEvent> WaitForEvents(const std::string& job_id,
                                          int64_t from_seq, int64_t timeout_ms,
                                          bool* closed);

  // Seeds the job's history from the durable store at startup, keeping the
  // stored seq numbers; `events` must be seq 1..N in order (DATA_LOSS
  // otherwise). Replaces whatever the hub held for the job.
  absl::Status Restore(const std::string& job_id,
                       std::vector<v1::JobEvent> events, bool closed);

  // Marks the job's history complete: watchers finish after its last event.
  void Close(const std::string& job_id);

  // Wakes every waiter (used at shutdown).
  void WakeAll();

 private:
  struct JobLog {
    std::vector<v1::JobEvent> events;
    bool closed = false;
  };

  std::mutex mu_;
  std::condition_variable appended_;
  std::map<std::string, JobLog> logs_;  // GUARDED_BY(mu_)
};

}  // namespace trainctl::coordinator
