#pragma once

// Internal to SqliteJobStore's .cc files: the prepared statements and small
// helpers over the sqlite3 C API.

#include <sqlite3.h>

#include <string>

#include "coordinator/sqlite_job_store.h"
#include "google/protobuf/message.h"

namespace trainctl::coordinator {

struct SqliteJobStore::Statements {
  sqlite3_stmt* put_job = nullptr;
  sqlite3_stmt* put_event = nullptr;
  sqlite3_stmt* raise_counter = nullptr;
  sqlite3_stmt* read_counter = nullptr;
  sqlite3_stmt* load_jobs = nullptr;
  sqlite3_stmt* load_events = nullptr;
  sqlite3_stmt* read_events = nullptr;
  sqlite3_stmt* put_checkpoint = nullptr;
  sqlite3_stmt* list_checkpoints = nullptr;
  sqlite3_stmt* delete_checkpoint = nullptr;
  sqlite3_stmt* delete_job_checkpoints = nullptr;
  sqlite3_stmt* delete_job_events = nullptr;
  sqlite3_stmt* delete_job = nullptr;
  ~Statements() {
    for (sqlite3_stmt* s :
         {put_job, put_event, raise_counter, read_counter, load_jobs,
          load_events, read_events, put_checkpoint, list_checkpoints, delete_checkpoint,
          delete_job_checkpoints, delete_job_events, delete_job}) {
      sqlite3_finalize(s);
    }
  }
};

namespace sqlite {

// Resets a statement (and its bindings) when the scope ends.
class Use {
 public:
  explicit Use(sqlite3_stmt* s) : s_(s) {}
  ~Use() {
    sqlite3_reset(s_);
    sqlite3_clear_bindings(s_);
  }
  sqlite3_stmt* operator*() const { return s_; }

 private:
  sqlite3_stmt* s_;
};

inline void BindText(sqlite3_stmt* s, int i, const std::string& text) {
  sqlite3_bind_text(s, i, text.data(), static_cast<int>(text.size()),
                    SQLITE_TRANSIENT);
}

inline void BindProto(sqlite3_stmt* s, int i,
                      const google::protobuf::Message& m) {
  const std::string bytes = m.SerializeAsString();
  sqlite3_bind_blob(s, i, bytes.data(), static_cast<int>(bytes.size()),
                    SQLITE_TRANSIENT);
}

inline bool ParseColumn(sqlite3_stmt* s, int i, google::protobuf::Message* m) {
  return m->ParseFromArray(sqlite3_column_blob(s, i),
                           sqlite3_column_bytes(s, i));
}

inline std::string ColumnText(sqlite3_stmt* s, int i) {
  const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(s, i));
  return text == nullptr ? "" : std::string(text, sqlite3_column_bytes(s, i));
}

}  // namespace sqlite
}  // namespace trainctl::coordinator
