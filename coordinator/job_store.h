#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "trainctl/v1/jobs.pb.h"

namespace trainctl::coordinator {

// One group of writes that a store applies atomically: all or none.
struct JobWrite {
  std::vector<v1::Job> jobs;         // full snapshots, upserted by id
  std::vector<v1::JobEvent> events;  // job_id and seq set; after the jobs
  int64_t next_job_number = 0;       // the id counter is raised to this
};

// How soon a write must be durable.
enum class Durability {
  kImmediate,  // on disk before Write returns (submissions, transitions)
  kGrouped,    // may ride a later commit (metrics, logs); see the store
};

// One entry of the checkpoint catalog.
struct CheckpointRecord {
  std::string job_id;
  int64_t step = 0;
  std::string path;
  int64_t created_unix_ms = 0;
  std::optional<double> metric;  // e.g. eval loss, when known
  // The whole record (cursor, size, evaluation); the fields above mirror it.
  v1::Checkpoint info;
};

// One rendezvous key of a job generation: kept durable so that ranks
// forming their group across a coordinator crash find what was set.
struct RendezvousRecord {
  std::string job_id;
  int generation = 0;
  std::string key;
  std::string value;
};

// What a store loads of one job.
struct StoredJob {
  v1::Job job;
  int64_t last_seq = 0;  // the seq of its newest event; 0 for none
  // Its newest events, in seq order, ending at last_seq: all of them or as
  // many as EventScan::keep_bytes allows.
  std::vector<v1::JobEvent> events;
};

// How Load reads the event histories: every event passes through `visit`
// (per job, in seq order, with the job it belongs to), and StoredJob keeps
// only the newest ones within `keep_bytes` (serialized), so loading a long
// history needs memory for its tail, not for all of it.
struct EventScan {
  size_t keep_bytes = std::numeric_limits<size_t>::max();
  std::function<void(v1::Job& job, const v1::JobEvent& event)> visit;
};

// What a coordinator needs to resume after a restart.
struct StoredState {
  std::vector<StoredJob> jobs;  // in the order they were first written
  int64_t next_job_number = 1;  // never below any number handed out
};

// The coordinator's durable state: job snapshots, each job's event log,
// the job id counter and the checkpoint catalog. JobManager writes through
// to it on every change and reads it back once at startup. Implementations
// are thread-safe. Common error codes: INVALID_ARGUMENT for a malformed
// record (empty id, seq < 1), FAILED_PRECONDITION for a record naming a job
// the store does not hold, and for the durable store UNAVAILABLE,
// RESOURCE_EXHAUSTED or DATA_LOSS when the disk or file fails.
class JobStore {
 public:
  virtual ~JobStore() = default;

  // Applies the whole group or nothing. Re-writing an event with a (job_id,
  // seq) already stored is a no-op (the first write wins), so a replay never
  // duplicates. Events of a job need its snapshot in this or an earlier write
  // (FAILED_PRECONDITION otherwise).
  virtual absl::Status Write(const JobWrite& write, Durability durability) = 0;

  // Makes every write made so far durable.
  virtual absl::Status Flush() = 0;

  // Calls `done` once every write made so far is durable: at once when it
  // already is, else from the thread whose commit makes it so (never when
  // the store closes first). `done` runs under the store's lock: it must
  // not call the store.
  virtual void WhenDurable(std::function<void()> done) = 0;

  // Every job with (the tail of) its events, and the id counter. DATA_LOSS
  // when a stored record cannot be read back.
  virtual absl::StatusOr<StoredState> Load(const EventScan& scan) = 0;
  // Every job with all of its events.
  absl::StatusOr<StoredState> LoadAll() { return Load(EventScan{}); }

  // A job's stored events with seq >= from_seq, in seq order, at most
  // max_events; none for a job the store does not hold.
  virtual absl::StatusOr<std::vector<v1::JobEvent>> ReadEvents(
      const std::string& job_id, int64_t from_seq, size_t max_events) = 0;

  // Checkpoint catalog, keyed by (job_id, step); Put replaces. Put:
  // FAILED_PRECONDITION for an unknown job. Delete: NOT_FOUND when absent.
  virtual absl::Status PutCheckpoint(const CheckpointRecord& checkpoint) = 0;
  // In step order; empty for a job without checkpoints.
  virtual absl::StatusOr<std::vector<CheckpointRecord>> ListCheckpoints(
      const std::string& job_id) = 0;
  virtual absl::Status DeleteCheckpoint(const std::string& job_id,
                                        int64_t step) = 0;
  // Forgets the job: its snapshot, events and catalog entries (not the
  // checkpoint files), durably. NOT_FOUND when it is not stored.
  virtual absl::Status DeleteJob(const std::string& job_id) = 0;

  // Rendezvous keys (see Rendezvous): Put replaces and is durable when it
  // returns; Erase and Drop may ride a later commit. Drop forgets the
  // job's keys of every generation below `below_generation`.
  virtual absl::Status PutRendezvousKey(const RendezvousRecord& record) = 0;
  virtual absl::Status EraseRendezvousKey(const std::string& job_id,
                                          int generation,
                                          const std::string& key) = 0;
  virtual absl::Status DropRendezvous(const std::string& job_id,
                                      int below_generation) = 0;
  virtual absl::StatusOr<std::vector<RendezvousRecord>> LoadRendezvous() = 0;

  // Conveniences: one-record writes, durable at once.
  absl::Status PutJob(const v1::Job& job);
  absl::Status AppendEvent(const std::string& job_id, v1::JobEvent event);
};

// The fake: everything in memory, gone with the object. Used by unit tests
// and by servers built without a state directory. Thread-safe.
class InMemoryJobStore : public JobStore {
 public:
  absl::Status Write(const JobWrite& write, Durability durability) override;
  absl::Status Flush() override { return absl::OkStatus(); }
  void WhenDurable(std::function<void()> done) override { done(); }
  absl::StatusOr<StoredState> Load(const EventScan& scan) override;
  absl::StatusOr<std::vector<v1::JobEvent>> ReadEvents(
      const std::string& job_id, int64_t from_seq,
      size_t max_events) override;
  absl::Status PutCheckpoint(const CheckpointRecord& checkpoint) override;
  absl::StatusOr<std::vector<CheckpointRecord>> ListCheckpoints(
      const std::string& job_id) override;
  absl::Status DeleteCheckpoint(const std::string& job_id,
                                int64_t step) override;
  absl::Status DeleteJob(const std::string& job_id) override;
  absl::Status PutRendezvousKey(const RendezvousRecord& record) override;
  absl::Status EraseRendezvousKey(const std::string& job_id, int generation,
                                  const std::string& key) override;
  absl::Status DropRendezvous(const std::string& job_id,
                              int below_generation) override;
  absl::StatusOr<std::vector<RendezvousRecord>> LoadRendezvous() override;

 private:
  std::mutex mu_;
  std::vector<std::string> order_;       // GUARDED_BY(mu_)
  std::map<std::string, v1::Job> jobs_;  // GUARDED_BY(mu_)
  std::map<std::string, std::map<int64_t, v1::JobEvent>>
      events_;  // GUARDED_BY(mu_)
  std::map<std::pair<std::string, int64_t>, CheckpointRecord>
      checkpoints_;              // GUARDED_BY(mu_)
  int64_t next_job_number_ = 1;  // GUARDED_BY(mu_)
  // (job id, generation, key) -> value
  std::map<std::tuple<std::string, int, std::string>, std::string>
      rendezvous_;  // GUARDED_BY(mu_)
};

// Runs a job's events through an EventScan as a store loads them: visits
// each, keeps the newest within the scan's byte budget. Shared by stores.
class EventScanner {
 public:
  EventScanner(const EventScan& scan, StoredJob& job) : scan_(scan), job_(job) {}
  void Add(v1::JobEvent event);
  // Moves the kept tail into the job.
  void Finish();

 private:
  const EventScan& scan_;
  StoredJob& job_;
  std::deque<v1::JobEvent> tail_;
  size_t bytes_ = 0;
};

// INVALID_ARGUMENT naming the first malformed record of the write (a job
// without id, an event without job_id or with seq < 1); shared by stores.
absl::Status ValidateJobWrite(const JobWrite& write);

}  // namespace trainctl::coordinator
