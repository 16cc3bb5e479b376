#include "coordinator/sqlite_job_store.h"

#include <sqlite3.h>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "coordinator/sqlite_util.h"

namespace trainctl::coordinator {
namespace {

// Version 2, which kMigrateFrom2 brings up to version 3 (kSchemaVersion);
// kMigrateFrom1 brings a version 1 file up to 2.
constexpr char kSchema[] = R"sql(
CREATE TABLE jobs (
  pos   INTEGER PRIMARY KEY,  -- first-write order = submission order
  id    TEXT NOT NULL UNIQUE,
  state INTEGER NOT NULL,     -- trainctl.v1.JobState
  job   BLOB NOT NULL         -- serialized trainctl.v1.Job
);
CREATE INDEX jobs_by_state ON jobs(state);
CREATE TABLE events (
  job_id TEXT NOT NULL REFERENCES jobs(id),
  seq    INTEGER NOT NULL,
  event  BLOB NOT NULL,       -- serialized trainctl.v1.JobEvent
  PRIMARY KEY (job_id, seq)
) WITHOUT ROWID;
CREATE TABLE checkpoints (
  job_id     TEXT NOT NULL REFERENCES jobs(id),
  step       INTEGER NOT NULL,
  path       TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  metric     REAL,
  info       BLOB,            -- serialized trainctl.v1.Checkpoint (v2)
  PRIMARY KEY (job_id, step)
) WITHOUT ROWID;
CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)
  WITHOUT ROWID;
INSERT INTO counters VALUES ('next_job_number', 1);
PRAGMA user_version = 2;
)sql";

// From each older version to the next one.
constexpr char kMigrateFrom1[] = R"sql(
ALTER TABLE checkpoints ADD COLUMN info BLOB;
PRAGMA user_version = 2;
)sql";
constexpr char kMigrateFrom2[] = R"sql(
CREATE TABLE rendezvous (     -- c10d keys of running generations
  job_id     TEXT NOT NULL,
  generation INTEGER NOT NULL,
  key        BLOB NOT NULL,
  value      BLOB NOT NULL,
  PRIMARY KEY (job_id, generation, key)
) WITHOUT ROWID;
PRAGMA user_version = 3;
)sql";

}  // namespace

SqliteJobStore::SqliteJobStore(std::string path, Options options)
    : path_(std::move(path)), options_(options) {}

absl::StatusOr<std::unique_ptr<SqliteJobStore>> SqliteJobStore::Open(
    const std::string& path, Options options) {
  std::unique_ptr<SqliteJobStore> store(new SqliteJobStore(path, options));
  RETURN_IF_ERROR(store->Init());
  return store;
}

SqliteJobStore::~SqliteJobStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (flusher_.joinable()) flusher_.join();
  {
    std::lock_guard<std::mutex> lock(checkpoint_mu_);
    checkpoint_stopping_ = true;
  }
  checkpoint_cv_.notify_all();
  if (checkpointer_.joinable()) checkpointer_.join();
  sqlite3_close(checkpoint_db_);
  {
    // Their owners may be gone already; nobody watches a closing store.
    std::lock_guard<std::mutex> lock(mu_);
    when_durable_.clear();
  }
  if (db_ != nullptr) {
    if (absl::Status s = Flush(); !s.ok()) {
      TLOG_ERROR << "closing the state database lost writes: " << s.message();
    }
  }
  stmts_.reset();
  sqlite3_close(db_);  // the last connection: checkpoints and drops the WAL
  if (lock_fd_ >= 0) close(lock_fd_);
}

absl::Status SqliteJobStore::LockFile() {
  const std::string lock_path = path_ + ".lock";
  lock_fd_ = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (lock_fd_ < 0) {
    return absl::UnavailableError(absl::StrCat(
        "state database ", path_, ": cannot open ", lock_path, ": ",
        std::strerror(errno),
        ". Check that the directory exists and this user may write it"));
  }
  // A coordinator that was just killed may still hold the lock briefly.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(3);
  while (flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno != EWOULDBLOCK || std::chrono::steady_clock::now() > give_up) {
      return absl::UnavailableError(absl::StrCat(
          "state database ", path_, " is locked (", lock_path,
          "). Another trainctl-coordinator is probably using this state "
          "directory: stop it, or give this one another --state-dir"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return absl::OkStatus();
}

int SqliteJobStore::OnWalCommit(void* self, sqlite3*, const char*, int pages) {
  auto* store = static_cast<SqliteJobStore*>(self);
  {
    std::lock_guard<std::mutex> lock(store->checkpoint_mu_);
    store->wal_pages_ = pages;
  }
  if (pages >= store->options_.checkpoint_pages) {
    store->checkpoint_cv_.notify_one();
  }
  return SQLITE_OK;
}

absl::Status SqliteJobStore::StartCheckpointer() {
  int rc = sqlite3_open_v2(path_.c_str(), &checkpoint_db_,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    return absl::UnavailableError(absl::StrCat(
        "state database ", path_, ": cannot open it a second time for "
        "checkpoints: ", sqlite3_errstr(rc)));
  }
  // A connection reads the file (and finds the WAL) only on first use;
  // until then a checkpoint on it does nothing.
  rc = sqlite3_exec(checkpoint_db_, "SELECT count(*) FROM sqlite_master",
                    nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) {
    return absl::UnavailableError(absl::StrCat(
        "state database ", path_, ": cannot read it for checkpoints: ",
        sqlite3_errmsg(checkpoint_db_)));
  }
  // Commits no longer checkpoint; this thread does, off their path.
  sqlite3_wal_hook(db_, &SqliteJobStore::OnWalCommit, this);
  checkpointer_ = std::thread([this] { CheckpointLoop(); });
  return absl::OkStatus();
}

void SqliteJobStore::CheckpointLoop() {
  bool failing = false;
  std::unique_lock<std::mutex> lock(checkpoint_mu_);
  while (true) {
    checkpoint_cv_.wait(lock, [this] {
      return checkpoint_stopping_ || wal_pages_ >= options_.checkpoint_pages;
    });
    if (checkpoint_stopping_) return;
    wal_pages_ = 0;
    lock.unlock();
    // PASSIVE: copies what it can without waiting for or blocking the
    // writer; the writer starts the log over once all of it is copied.
    int log_pages = 0, copied = 0;
    const int rc = sqlite3_wal_checkpoint_v2(
        checkpoint_db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log_pages, &copied);
    if (rc != SQLITE_OK && rc != SQLITE_BUSY && !failing) {
      TLOG_WARNING << "state database " << path_
                   << ": checkpoint failed (retried after the next commits): "
                   << sqlite3_errstr(rc);
    }
    failing = rc != SQLITE_OK && rc != SQLITE_BUSY;
    lock.lock();
  }
}

absl::Status SqliteJobStore::ErrorLocked(int rc,
                                         const std::string& doing) const {
  const std::string what =
      absl::StrCat("state database ", path_, ": ", doing, ": ",
                   db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
  switch (rc & 0xff) {
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return absl::DataLossError(absl::StrCat(
          what,
          ". The file is damaged or is not a trainctl state database: "
          "restore it from a backup, or move it aside to start with no "
          "jobs (they are then forgotten)"));
    case SQLITE_FULL:
      return absl::ResourceExhaustedError(
          absl::StrCat(what, " (is the disk full?)"));
    case SQLITE_CONSTRAINT:
      return absl::FailedPreconditionError(what);
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(absl::StrCat(
          what,
          ". Another trainctl-coordinator is probably using this state "
          "directory: stop it, or give this one another --state-dir"));
    case SQLITE_CANTOPEN:
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_AUTH:
      return absl::UnavailableError(absl::StrCat(
          what,
          ". Check that the directory exists and this user may write "
          "it"));
    default:
      return absl::UnavailableError(what);
  }
}

absl::Status SqliteJobStore::ExecLocked(const char* sql) {
  const int rc = sqlite3_exec(db_, sql, nullptr, nullptr, nullptr);
  return rc == SQLITE_OK ? absl::OkStatus()
                         : ErrorLocked(rc, absl::StrCat("running '", sql, "'"));
}

absl::Status SqliteJobStore::Init() {
  RETURN_IF_ERROR(LockFile());
  std::lock_guard<std::mutex> lock(mu_);
  int rc = sqlite3_open_v2(
      path_.c_str(), &db_,
      SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
      nullptr);
  if (rc != SQLITE_OK) return ErrorLocked(rc, "cannot open");
  sqlite3_extended_result_codes(db_, 1);
  // Only the checkpointer shares the file, and it never takes the write
  // lock; the flock keeps other processes out.
  sqlite3_busy_timeout(db_, 3000);
  std::string mode;
  rc = sqlite3_exec(
      db_, "PRAGMA journal_mode=WAL",
      [](void* out, int, char** values, char**) {
        *static_cast<std::string*>(out) = values[0] ? values[0] : "";
        return 0;
      },
      &mode, nullptr);
  if (rc != SQLITE_OK) return ErrorLocked(rc, "cannot read it");
  if (mode != "wal") {
    return absl::UnavailableError(
        absl::StrCat("state database ", path_,
                     ": the filesystem does not support WAL "
                     "journaling (got '",
                     mode, "'); use a local --state-dir"));
  }
  // WAL + NORMAL: a commit is durable once written to the WAL, which survives
  // a process crash; only an OS crash or power loss can drop the last commits
  // (the file stays consistent). FULL would fsync every commit.
  RETURN_IF_ERROR(ExecLocked("PRAGMA synchronous=NORMAL"));
  RETURN_IF_ERROR(ExecLocked("PRAGMA foreign_keys=ON"));

  RETURN_IF_ERROR(ExecLocked("BEGIN IMMEDIATE"));
  int version = 0;
  int tables = 0;
  sqlite3_exec(
      db_, "PRAGMA user_version",
      [](void* out, int, char** v, char**) {
        *static_cast<int*>(out) = v[0] ? atoi(v[0]) : 0;
        return 0;
      },
      &version, nullptr);
  sqlite3_exec(
      db_, "SELECT count(*) FROM sqlite_master",
      [](void* out, int, char** v, char**) {
        *static_cast<int*>(out) = v[0] ? atoi(v[0]) : 0;
        return 0;
      },
      &tables, nullptr);
  absl::Status schema = absl::OkStatus();
  if (version > kSchemaVersion) {
    schema = absl::FailedPreconditionError(absl::StrCat(
        "state database ", path_, " has schema version ", version,
        ", newer than the ", kSchemaVersion,
        " this trainctl-coordinator understands: run the newer "
        "trainctl-coordinator that wrote it, or give this one another "
        "--state-dir"));
  } else if (version == 0 && tables > 0) {
    schema = absl::FailedPreconditionError(absl::StrCat(
        "state database ", path_,
        " is an SQLite file but not a trainctl "
        "state database: give the coordinator another --state-dir"));
  } else {
    // A new file gets version 2, then every file the migrations after it.
    if (version == 0) schema = ExecLocked(kSchema);
    if (version == 1) schema = ExecLocked(kMigrateFrom1);
    if (schema.ok() && version <= 2) schema = ExecLocked(kMigrateFrom2);
  }
  if (!schema.ok()) {
    ExecLocked("ROLLBACK").IgnoreError();
    return schema;
  }
  RETURN_IF_ERROR(ExecLocked("COMMIT"));

  stmts_ = std::make_unique<Statements>();
  const std::pair<sqlite3_stmt**, const char*> sql[] = {
      {&stmts_->put_job,
       "INSERT INTO jobs(id, state, job) VALUES(?1, ?2, ?3) ON CONFLICT(id) "
       "DO UPDATE SET state = excluded.state, job = excluded.job"},
      {&stmts_->put_event,
       "INSERT INTO events(job_id, seq, event) VALUES(?1, ?2, ?3) "
       "ON CONFLICT(job_id, seq) DO NOTHING"},
      {&stmts_->raise_counter,
       "UPDATE counters SET value = max(value, ?1) "
       "WHERE name = 'next_job_number'"},
      {&stmts_->read_counter,
       "SELECT value FROM counters WHERE name = 'next_job_number'"},
      {&stmts_->load_jobs, "SELECT id, job FROM jobs ORDER BY pos"},
      {&stmts_->load_events,
       "SELECT seq, event FROM events WHERE job_id = ?1 ORDER BY seq"},
      {&stmts_->read_events,
       "SELECT seq, event FROM events WHERE job_id = ?1 AND seq >= ?2 "
       "ORDER BY seq LIMIT ?3"},
      {&stmts_->put_checkpoint,
       "INSERT OR REPLACE INTO checkpoints(job_id, step, path, created_ms, "
       "metric, info) VALUES(?1, ?2, ?3, ?4, ?5, ?6)"},
      {&stmts_->list_checkpoints,
       "SELECT step, path, created_ms, metric, info FROM checkpoints "
       "WHERE job_id = ?1 ORDER BY step"},
      {&stmts_->delete_checkpoint,
       "DELETE FROM checkpoints WHERE job_id = ?1 AND step = ?2"},
      {&stmts_->delete_job_checkpoints,
       "DELETE FROM checkpoints WHERE job_id = ?1"},
      {&stmts_->delete_job_events, "DELETE FROM events WHERE job_id = ?1"},
      {&stmts_->delete_job, "DELETE FROM jobs WHERE id = ?1"},
  };
  for (const auto& [stmt, text] : sql) {
    rc = sqlite3_prepare_v3(db_, text, -1, SQLITE_PREPARE_PERSISTENT, stmt,
                            nullptr);
    if (rc != SQLITE_OK) return ErrorLocked(rc, "preparing statements");
  }
  flusher_ = std::thread([this] { FlushLoop(); });
  return StartCheckpointer();
}

}  // namespace trainctl::coordinator
