// SqliteJobStore's rendezvous keys (JobStore::PutRendezvousKey and the
// rest): few and small, written while a generation forms its group, so
// each statement is prepared when used.

#include <sqlite3.h>

#include "absl/strings/str_cat.h"
#include "coordinator/sqlite_job_store.h"

namespace trainctl::coordinator {
namespace {

// A statement prepared for one use.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) { rc_ = sqlite3_prepare_v2(db, sql, -1, &s_, nullptr); }
  ~Statement() { sqlite3_finalize(s_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  int prepared() const { return rc_; }
  sqlite3_stmt* operator*() const { return s_; }

 private:
  sqlite3_stmt* s_ = nullptr;
  int rc_ = SQLITE_ERROR;
};

void BindBytes(sqlite3_stmt* s, int i, const std::string& bytes) {
  sqlite3_bind_blob(s, i, bytes.data(), static_cast<int>(bytes.size()),
                    SQLITE_TRANSIENT);
}

std::string ColumnBytes(sqlite3_stmt* s, int i) {
  const auto* data = static_cast<const char*>(sqlite3_column_blob(s, i));
  return data == nullptr ? "" : std::string(data, sqlite3_column_bytes(s, i));
}

}  // namespace

absl::Status SqliteJobStore::PutRendezvousKey(const RendezvousRecord& record) {
  std::lock_guard<std::mutex> lock(mu_);
  return ApplyLocked(
      [this, record] {
        Statement s(db_,
                    "INSERT OR REPLACE INTO rendezvous(job_id, generation, "
                    "key, value) VALUES(?1, ?2, ?3, ?4)");
        if (s.prepared() != SQLITE_OK) {
          return ErrorLocked(s.prepared(), "preparing a rendezvous write");
        }
        sqlite3_bind_text(*s, 1, record.job_id.data(),
                          static_cast<int>(record.job_id.size()),
                          SQLITE_TRANSIENT);
        sqlite3_bind_int64(*s, 2, record.generation);
        BindBytes(*s, 3, record.key);
        BindBytes(*s, 4, record.value);
        const int rc = sqlite3_step(*s);
        return rc == SQLITE_DONE
                   ? absl::OkStatus()
                   : ErrorLocked(rc, absl::StrCat("keeping a rendezvous key "
                                                  "of job ", record.job_id));
      },
      Durability::kImmediate);
}

absl::Status SqliteJobStore::EraseRendezvousKey(const std::string& job_id,
                                                int generation,
                                                const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  return ApplyLocked(
      [this, job_id, generation, key] {
        Statement s(db_,
                    "DELETE FROM rendezvous WHERE job_id = ?1 AND "
                    "generation = ?2 AND key = ?3");
        if (s.prepared() != SQLITE_OK) {
          return ErrorLocked(s.prepared(), "preparing a rendezvous delete");
        }
        sqlite3_bind_text(*s, 1, job_id.data(),
                          static_cast<int>(job_id.size()), SQLITE_TRANSIENT);
        sqlite3_bind_int64(*s, 2, generation);
        BindBytes(*s, 3, key);
        const int rc = sqlite3_step(*s);
        return rc == SQLITE_DONE ? absl::OkStatus()
                                 : ErrorLocked(rc, "deleting a rendezvous key");
      },
      Durability::kGrouped);
}

absl::Status SqliteJobStore::DropRendezvous(const std::string& job_id,
                                            int below_generation) {
  std::lock_guard<std::mutex> lock(mu_);
  return ApplyLocked(
      [this, job_id, below_generation] {
        Statement s(db_,
                    "DELETE FROM rendezvous WHERE job_id = ?1 AND "
                    "generation < ?2");
        if (s.prepared() != SQLITE_OK) {
          return ErrorLocked(s.prepared(), "preparing a rendezvous delete");
        }
        sqlite3_bind_text(*s, 1, job_id.data(),
                          static_cast<int>(job_id.size()), SQLITE_TRANSIENT);
        sqlite3_bind_int64(*s, 2, below_generation);
        const int rc = sqlite3_step(*s);
        return rc == SQLITE_DONE
                   ? absl::OkStatus()
                   : ErrorLocked(rc, absl::StrCat("forgetting the rendezvous "
                                                  "keys of job ", job_id));
      },
      Durability::kGrouped);
}

absl::StatusOr<std::vector<RendezvousRecord>> SqliteJobStore::LoadRendezvous() {
  std::lock_guard<std::mutex> lock(mu_);
  Statement s(db_,
              "SELECT job_id, generation, key, value FROM rendezvous "
              "ORDER BY job_id, generation, key");
  if (s.prepared() != SQLITE_OK) {
    return ErrorLocked(s.prepared(), "reading rendezvous keys");
  }
  std::vector<RendezvousRecord> out;
  int rc;
  while ((rc = sqlite3_step(*s)) == SQLITE_ROW) {
    RendezvousRecord record;
    const auto* job = reinterpret_cast<const char*>(sqlite3_column_text(*s, 0));
    record.job_id = job == nullptr ? "" : job;
    record.generation = static_cast<int>(sqlite3_column_int64(*s, 1));
    record.key = ColumnBytes(*s, 2);
    record.value = ColumnBytes(*s, 3);
    out.push_back(std::move(record));
  }
  if (rc != SQLITE_DONE) return ErrorLocked(rc, "reading rendezvous keys");
  return out;
}

}  // namespace trainctl::coordinator
