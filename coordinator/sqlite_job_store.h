#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/job_store.h"

struct sqlite3;
struct sqlite3_stmt;

namespace trainctl::coordinator {

// JobStore in one SQLite file (WAL journal, synchronous=NORMAL): durable
// against a crash of the process (kill -9 included) for every committed
// write; a power loss or OS crash may lose the last commits, never corrupt
// the file. Grouped writes are committed by a background thread at most
// `group_commit_ms` after the first one, so a kill -9 loses at most that
// window of metrics and logs; immediate writes (and everything before them)
// are committed before Write returns.
//
// The connection holds an exclusive lock on the file while open, so a second
// coordinator on the same state directory fails to open it (UNAVAILABLE).
// Thread-safe: one mutex serializes all use of the connection. Open once;
// the destructor commits what is pending and closes the file.
class SqliteJobStore : public JobStore {
 public:
  static constexpr int kSchemaVersion = 3;

  struct Options {
    int64_t group_commit_ms = 50;  // 0 commits every write at once
  };

  // Opens `path`, creating the file and schema when missing. Errors name the
  // file and what to do: DATA_LOSS when it is not a (readable) SQLite
  // database, FAILED_PRECONDITION when its schema is newer than this binary's,
  // UNAVAILABLE when it cannot be opened or another process holds it.
  static absl::StatusOr<std::unique_ptr<SqliteJobStore>> Open(
      const std::string& path, Options options);
  static absl::StatusOr<std::unique_ptr<SqliteJobStore>> Open(
      const std::string& path) {
    return Open(path, Options());
  }
  ~SqliteJobStore() override;
  SqliteJobStore(const SqliteJobStore&) = delete;
  SqliteJobStore& operator=(const SqliteJobStore&) = delete;

  absl::Status Write(const JobWrite& write, Durability durability) override;
  absl::Status Flush() override;
  void WhenDurable(std::function<void()> done) override;
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

  const std::string& path() const { return path_; }

 private:
  // Prepared statements, indexed by the enum in the .cc file.
  struct Statements;
  // One write, re-runnable: a failed commit rolls back and replays them all.
  using Op = std::function<absl::Status()>;

  SqliteJobStore(std::string path, Options options);
  absl::Status Init();
  absl::Status ExecLocked(const char* sql);
  absl::Status ErrorLocked(int rc, const std::string& doing) const;
  // Runs `op` inside the open transaction, all or nothing (a savepoint).
  absl::Status ApplyLocked(const Op& op, Durability durability);
  absl::Status BeginLocked();
  absl::Status CommitLocked();
  absl::Status WriteJobsLocked(const JobWrite& write);
  void FlushLoop();

  const std::string path_;
  const Options options_;
  sqlite3* db_ = nullptr;
  std::unique_ptr<Statements> stmts_;

  std::mutex mu_;
  std::condition_variable cv_;
  bool in_txn_ = false;                                // GUARDED_BY(mu_)
  std::chrono::steady_clock::time_point txn_started_;  // GUARDED_BY(mu_)
  std::vector<Op> uncommitted_;                        // GUARDED_BY(mu_)
  // WhenDurable callbacks waiting for the next successful commit.
  std::vector<std::function<void()>> when_durable_;    // GUARDED_BY(mu_)
  bool stopping_ = false;                              // GUARDED_BY(mu_)
  std::thread flusher_;
};

}  // namespace trainctl::coordinator
