#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "common/clock.h"
#include "coordinator/event_hub.h"
#include "coordinator/job_store.h"

namespace trainctl::coordinator {

// Carries JobManager's writes to the JobStore in the order they were made,
// but outside JobManager's lock: a commit that takes 30 ms then holds up
// the callers that must wait for it, not every report and RPC behind the
// lock (docs/performance.md). Shaped like LevelDB's writer queue: Enqueue,
// called under the caller's lock, only moves the write into a queue; the
// first Drain after it writes everything queued as one group (one commit
// for all of its durable writes); a Drain whose write is already being
// written by another caller waits for that group only if it asked for
// durability, and otherwise returns at once.
//
// A write that fails stays at the head of the queue and is retried by the
// next Drain, holding back the writes after it, so the store always holds a
// prefix of what was queued. Events reach the EventHub's watchers once
// their write is durable (EventHub explains why). Thread-safe; never calls
// back into its caller.
class StoreWriter {
 public:
  // What a Drain after the lock has to do: write everything queued up to
  // `last`, and, when `durable` is set, wait for that write's commit and
  // return its status. Tickets of one input combine with Add.
  struct Ticket {
    struct Result;
    uint64_t last = 0;
    std::shared_ptr<Result> durable;
    void Add(Ticket later);
  };

  StoreWriter(JobStore& store, EventHub& events, const Clock& clock)
      : store_(store), events_(events), clock_(clock) {}

  // Queues a group of job snapshots and events. kImmediate: the ticket
  // waits for its commit.
  Ticket Enqueue(JobWrite write, Durability durability);
  // Queues a new job's first write: durable, not retried (the caller tells
  // its client the job was refused), and not published (the caller adds
  // the job to the hub once it is durable).
  Ticket EnqueueNewJob(JobWrite write);
  // Queues the deletion of a job's records, after every write before it.
  Ticket EnqueueDelete(std::string job_id);
  // Queue a change to the checkpoint catalog, in order with the rest.
  Ticket EnqueuePutCheckpoint(CheckpointRecord record);
  Ticket EnqueueDeleteCheckpoint(std::string job_id, int64_t step);

  // Call without the caller's lock. Writes what is queued unless another
  // caller is doing so; for a durable ticket, returns once its write was
  // tried, with its status (OK otherwise).
  absl::Status Drain(const Ticket& ticket);
  // Everything queued so far written and committed; the first error.
  absl::Status Flush();

 private:
  enum class Kind { kWrite, kNewJob, kDelete, kPutCheckpoint, kDeleteCheckpoint };
  struct Op {
    uint64_t ticket = 0;
    Kind kind = Kind::kWrite;
    JobWrite write;
    std::string delete_id;  // kDelete, kDeleteCheckpoint
    CheckpointRecord checkpoint;  // kPutCheckpoint; its step for kDeleteCheckpoint
    bool immediate = false;
    std::shared_ptr<Ticket::Result> result;  // set when a caller waits
  };

  Ticket Push(Op op, bool wait);
  // Writes one group taken off the queue (without mu_); sets the results.
  // Returns the index of the write that failed (group.size() for none).
  size_t WriteGroup(std::deque<Op>& group, absl::Status* first_error);
  // Leads one round under `lock` (released while writing). False when the
  // round failed.
  bool LeadRoundLocked(std::unique_lock<std::mutex>& lock,
                       absl::Status* error);

  JobStore& store_;
  EventHub& events_;
  const Clock& clock_;

  std::mutex mu_;
  std::condition_variable written_;  // a round finished
  std::deque<Op> queue_;             // GUARDED_BY(mu_)
  uint64_t next_ticket_ = 1;         // GUARDED_BY(mu_)
  bool writing_ = false;             // a caller leads a round, GUARDED_BY(mu_)
  // Every op with a ticket up to this was taken by a round. GUARDED_BY(mu_)
  uint64_t taken_through_ = 0;
  bool failing_ = false;  // the last round failed, GUARDED_BY(mu_)
  int64_t retry_at_ms_ = 0;  // GUARDED_BY(mu_)
  static constexpr int64_t kRetryAfterMs = 1000;
};

struct StoreWriter::Ticket::Result {
  bool tried = false;
  absl::Status status;
};

}  // namespace trainctl::coordinator
