#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "coordinator/sqlite_job_store.h"
#include "coordinator/sqlite_util.h"

// SqliteJobStore's writes, group commit and reads; opening is in
// sqlite_job_store.cc.

namespace trainctl::coordinator {

using sqlite::BindProto;
using sqlite::BindText;
using sqlite::ColumnText;
using sqlite::ParseColumn;
using sqlite::Use;

absl::Status SqliteJobStore::BeginLocked() {
  RETURN_IF_ERROR(ExecLocked("BEGIN IMMEDIATE"));
  in_txn_ = true;
  txn_started_ = std::chrono::steady_clock::now();
  // Writes whose commit failed are replayed (they are idempotent).
  for (const Op& op : uncommitted_) {
    absl::Status s = op();
    if (!s.ok()) {
      ExecLocked("ROLLBACK").IgnoreError();
      in_txn_ = false;
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status SqliteJobStore::CommitLocked() {
  absl::Status s = ExecLocked("COMMIT");
  if (s.ok()) {
    uncommitted_.clear();
    std::vector<std::function<void()>> done;
    done.swap(when_durable_);
    for (const auto& callback : done) callback();
  } else if (sqlite3_get_autocommit(db_) == 0) {
    ExecLocked("ROLLBACK").IgnoreError();  // uncommitted_ replays next time
  }
  in_txn_ = false;
  return s;
}

absl::Status SqliteJobStore::ApplyLocked(const Op& op, Durability durability) {
  if (!in_txn_) RETURN_IF_ERROR(BeginLocked());
  RETURN_IF_ERROR(ExecLocked("SAVEPOINT write"));
  absl::Status s = op();
  if (!s.ok()) {
    ExecLocked("ROLLBACK TO write").IgnoreError();
    ExecLocked("RELEASE write").IgnoreError();
    return s;
  }
  RETURN_IF_ERROR(ExecLocked("RELEASE write"));
  uncommitted_.push_back(op);
  if (durability == Durability::kImmediate || options_.group_commit_ms <= 0) {
    return CommitLocked();
  }
  cv_.notify_all();
  return absl::OkStatus();
}

absl::Status SqliteJobStore::WriteJobsLocked(const JobWrite& write) {
  for (const v1::Job& job : write.jobs) {
    Use s(stmts_->put_job);
    BindText(*s, 1, job.id());
    sqlite3_bind_int(*s, 2, job.state());
    BindProto(*s, 3, job);
    const int rc = sqlite3_step(*s);
    if (rc != SQLITE_DONE) {
      return ErrorLocked(rc, absl::StrCat("writing job ", job.id()));
    }
  }
  for (const v1::JobEvent& event : write.events) {
    Use s(stmts_->put_event);
    BindText(*s, 1, event.job_id());
    sqlite3_bind_int64(*s, 2, event.seq());
    BindProto(*s, 3, event);
    const int rc = sqlite3_step(*s);
    if (rc != SQLITE_DONE) {
      return ErrorLocked(rc, absl::StrCat("writing event ", event.seq(),
                                          " of job ", event.job_id()));
    }
  }
  if (write.next_job_number > 0) {
    Use s(stmts_->raise_counter);
    sqlite3_bind_int64(*s, 1, write.next_job_number);
    const int rc = sqlite3_step(*s);
    if (rc != SQLITE_DONE) return ErrorLocked(rc, "writing the job counter");
  }
  return absl::OkStatus();
}

absl::Status SqliteJobStore::Write(const JobWrite& write,
                                   Durability durability) {
  RETURN_IF_ERROR(ValidateJobWrite(write));
  auto copy = std::make_shared<const JobWrite>(write);
  std::lock_guard<std::mutex> lock(mu_);
  return ApplyLocked([this, copy] { return WriteJobsLocked(*copy); },
                     durability);
}

absl::Status SqliteJobStore::Flush() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!in_txn_ && !uncommitted_.empty()) RETURN_IF_ERROR(BeginLocked());
  return in_txn_ ? CommitLocked() : absl::OkStatus();
}

void SqliteJobStore::WhenDurable(std::function<void()> done) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!in_txn_ && uncommitted_.empty()) {
    done();
    return;
  }
  when_durable_.push_back(std::move(done));
}

void SqliteJobStore::FlushLoop() {
  const auto window = std::chrono::milliseconds(options_.group_commit_ms);
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return stopping_ || in_txn_; });
    if (stopping_) return;
    cv_.wait_until(lock, txn_started_ + window,
                   [this] { return stopping_ || !in_txn_; });
    if (stopping_) return;  // the destructor commits
    if (!in_txn_) continue;
    if (absl::Status s = CommitLocked(); !s.ok()) {
      TLOG_ERROR << "group commit failed, will retry: " << s.message();
      // Back off so a full disk does not spin this thread.
      cv_.wait_for(lock, window * 20, [this] { return stopping_; });
      if (!stopping_ && !uncommitted_.empty()) {
        if (BeginLocked().ok()) continue;
      }
    }
  }
}

absl::StatusOr<StoredState> SqliteJobStore::Load(const EventScan& scan) {
  std::lock_guard<std::mutex> lock(mu_);
  StoredState state;
  {
    Use s(stmts_->read_counter);
    if (sqlite3_step(*s) == SQLITE_ROW) {
      state.next_job_number = sqlite3_column_int64(*s, 0);
    }
  }
  Use jobs(stmts_->load_jobs);
  int rc;
  while ((rc = sqlite3_step(*jobs)) == SQLITE_ROW) {
    StoredJob stored;
    const std::string id = ColumnText(*jobs, 0);
    if (!ParseColumn(*jobs, 1, &stored.job) || stored.job.id() != id) {
      return absl::DataLossError(absl::StrCat(
          "state database ", path_, ": the record of job ", id,
          " cannot be read; restore the file from a backup or move it aside"));
    }
    EventScanner scanner(scan, stored);
    Use events(stmts_->load_events);
    BindText(*events, 1, id);
    int erc;
    while ((erc = sqlite3_step(*events)) == SQLITE_ROW) {
      v1::JobEvent event;
      if (!ParseColumn(*events, 1, &event) ||
          event.seq() != sqlite3_column_int64(*events, 0)) {
        return absl::DataLossError(absl::StrCat(
            "state database ", path_, ": event ",
            sqlite3_column_int64(*events, 0), " of job ", id,
            " cannot be read; restore the file from a backup or move it "
            "aside"));
      }
      scanner.Add(std::move(event));
    }
    if (erc != SQLITE_DONE) {
      return ErrorLocked(erc, absl::StrCat("reading events of job ", id));
    }
    scanner.Finish();
    state.jobs.push_back(std::move(stored));
  }
  if (rc != SQLITE_DONE) return ErrorLocked(rc, "reading jobs");
  return state;
}

absl::StatusOr<std::vector<v1::JobEvent>> SqliteJobStore::ReadEvents(
    const std::string& job_id, int64_t from_seq, size_t max_events) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::JobEvent> out;
  Use s(stmts_->read_events);
  BindText(*s, 1, job_id);
  sqlite3_bind_int64(*s, 2, from_seq);
  sqlite3_bind_int64(
      *s, 3,
      static_cast<int64_t>(std::min<size_t>(max_events, INT64_MAX)));
  int rc;
  while ((rc = sqlite3_step(*s)) == SQLITE_ROW) {
    v1::JobEvent event;
    if (!ParseColumn(*s, 1, &event) ||
        event.seq() != sqlite3_column_int64(*s, 0)) {
      return absl::DataLossError(absl::StrCat(
          "state database ", path_, ": event ", sqlite3_column_int64(*s, 0),
          " of job ", job_id,
          " cannot be read; restore the file from a backup or move it aside"));
    }
    out.push_back(std::move(event));
  }
  if (rc != SQLITE_DONE) {
    return ErrorLocked(rc, absl::StrCat("reading events of job ", job_id));
  }
  return out;
}

absl::Status SqliteJobStore::PutCheckpoint(const CheckpointRecord& checkpoint) {
  std::lock_guard<std::mutex> lock(mu_);
  return ApplyLocked(
      [this, checkpoint] {
        Use s(stmts_->put_checkpoint);
        BindText(*s, 1, checkpoint.job_id);
        sqlite3_bind_int64(*s, 2, checkpoint.step);
        BindText(*s, 3, checkpoint.path);
        sqlite3_bind_int64(*s, 4, checkpoint.created_unix_ms);
        if (checkpoint.metric.has_value()) {
          sqlite3_bind_double(*s, 5, *checkpoint.metric);
        }  // else NULL, left by clear_bindings
        const std::string info = checkpoint.info.SerializeAsString();
        sqlite3_bind_blob(*s, 6, info.data(), static_cast<int>(info.size()),
                          SQLITE_TRANSIENT);
        const int rc = sqlite3_step(*s);
        return rc == SQLITE_DONE
                   ? absl::OkStatus()
                   : ErrorLocked(rc, absl::StrCat("cataloging a checkpoint of "
                                                  "job ",
                                                  checkpoint.job_id));
      },
      Durability::kImmediate);
}

absl::StatusOr<std::vector<CheckpointRecord>> SqliteJobStore::ListCheckpoints(
    const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  Use s(stmts_->list_checkpoints);
  BindText(*s, 1, job_id);
  std::vector<CheckpointRecord> out;
  int rc;
  while ((rc = sqlite3_step(*s)) == SQLITE_ROW) {
    CheckpointRecord c;
    c.job_id = job_id;
    c.step = sqlite3_column_int64(*s, 0);
    c.path = ColumnText(*s, 1);
    c.created_unix_ms = sqlite3_column_int64(*s, 2);
    if (sqlite3_column_type(*s, 3) != SQLITE_NULL) {
      c.metric = sqlite3_column_double(*s, 3);
    }
    if (sqlite3_column_type(*s, 4) == SQLITE_BLOB &&
        !c.info.ParseFromArray(sqlite3_column_blob(*s, 4),
                               sqlite3_column_bytes(*s, 4))) {
      return absl::DataLossError(absl::StrCat(
          "state database ", path_, ": checkpoint record of job ", job_id,
          " at step ", c.step, " cannot be read"));
    }
    out.push_back(std::move(c));
  }
  if (rc != SQLITE_DONE) {
    return ErrorLocked(rc, absl::StrCat("listing checkpoints of job ", job_id));
  }
  return out;
}

absl::Status SqliteJobStore::DeleteCheckpoint(const std::string& job_id,
                                              int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  return ApplyLocked(
      [this, job_id, step] {
        Use s(stmts_->delete_checkpoint);
        BindText(*s, 1, job_id);
        sqlite3_bind_int64(*s, 2, step);
        const int rc = sqlite3_step(*s);
        if (rc != SQLITE_DONE) {
          return ErrorLocked(rc, "deleting a checkpoint");
        }
        if (sqlite3_changes(db_) == 0) {
          return absl::NotFoundError(absl::StrCat(
              "job ", job_id, " has no checkpoint at step ", step));
        }
        return absl::OkStatus();
      },
      Durability::kImmediate);
}

}  // namespace trainctl::coordinator

namespace trainctl::coordinator {

absl::Status SqliteJobStore::DeleteJob(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  return ApplyLocked(
      [this, job_id] {
        for (sqlite3_stmt* stmt :
             {stmts_->delete_job_checkpoints, stmts_->delete_job_events,
              stmts_->delete_job}) {
          Use s(stmt);
          BindText(*s, 1, job_id);
          const int rc = sqlite3_step(*s);
          if (rc != SQLITE_DONE) {
            return ErrorLocked(rc, absl::StrCat("deleting job ", job_id));
          }
        }
        if (sqlite3_changes(db_) == 0) {
          return absl::NotFoundError(absl::StrCat("no job with id '", job_id,
                                                  "' is stored"));
        }
        return absl::OkStatus();
      },
      Durability::kImmediate);
}

}  // namespace trainctl::coordinator
