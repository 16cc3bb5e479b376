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
// WAL checkpoints (copying the log back into the file, with an fsync) run
// on a second connection in a background thread once the log passes
// `checkpoint_pages`: inside a commit, as SQLite does them by default, one
// took 20-30 ms every few seconds at 3,000 events/s and held every durable
// write behind it (docs/performance.md).
//
// An flock on `<file>.lock` is held while open, so a second coordinator on
// the same state directory fails to open it (UNAVAILABLE). Thread-safe: one
// mutex serializes all use of the main connection. Open once; the
// destructor commits what is pending and closes the file.
class SqliteJobStore : public JobStore {
 public:
  static constexpr int kSchemaVersion = 3;

  struct Options {
    int64_t group_commit_ms = 50;  // 0 commits every write at once
    // WAL pages (4 KiB) after which the background thread checkpoints.
    int checkpoint_pages = 1000;
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
  // Takes `<path>.lock`, waiting up to 3 s for a coordinator just killed.
  absl::Status LockFile();
  absl::Status StartCheckpointer();
  void CheckpointLoop();
  // sqlite3_wal_hook: after each commit, with the WAL's size in pages.
  static int OnWalCommit(void* self, sqlite3* db, const char* name, int pages);

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

  int lock_fd_ = -1;
  // The checkpointer's own connection and its wake-up; used by its thread.
  sqlite3* checkpoint_db_ = nullptr;
  std::mutex checkpoint_mu_;
  std::condition_variable checkpoint_cv_;
  int wal_pages_ = 0;              // GUARDED_BY(checkpoint_mu_)
  bool checkpoint_stopping_ = false;  // GUARDED_BY(checkpoint_mu_)
  std::thread checkpointer_;
};

}  // namespace trainctl::coordinator
