// The same behaviour checks against the in-memory fake and the SQLite store,
// then what only the durable store promises (reopen, kill, bad files).

#include "coordinator/job_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "coordinator/sqlite_job_store.h"
#include "google/protobuf/util/message_differencer.h"

namespace trainctl::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::Job MakeJob(const std::string& id, v1::JobState state) {
  v1::Job job;
  job.set_id(id);
  job.set_state(state);
  job.mutable_spec()->set_name("name-" + id);
  job.set_reason("because");
  auto* t = job.add_transitions();
  t->set_to(v1::JOB_STATE_QUEUED);
  t->set_reason("submitted");
  auto* rank = job.add_ranks();
  rank->set_worker("w1");
  rank->set_state(v1::RANK_STATE_RUNNING);
  job.mutable_latest_train()->set_step(12);
  (*job.mutable_latest_train()->mutable_values())["loss"] = 0.25;
  return job;
}

v1::JobEvent MakeEvent(const std::string& job_id, int64_t seq,
                       const std::string& text) {
  v1::JobEvent event;
  event.set_job_id(job_id);
  event.set_seq(seq);
  event.mutable_log()->set_text(text);
  return event;
}

// Field by field: serialized bytes may differ in map order.
bool Same(const google::protobuf::Message& a,
          const google::protobuf::Message& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

std::vector<int64_t> Seqs(const StoredJob& job) {
  std::vector<int64_t> out;
  for (const auto& e : job.events) out.push_back(e.seq());
  return out;
}

std::vector<int64_t> Steps(const std::vector<CheckpointRecord>& list) {
  std::vector<int64_t> out;
  for (const auto& c : list) out.push_back(c.step);
  return out;
}

struct InMemory {
  static std::unique_ptr<JobStore> Open(const std::string&) {
    return std::make_unique<InMemoryJobStore>();
  }
};
struct Sqlite {
  static std::unique_ptr<JobStore> Open(const std::string& path) {
    auto store = SqliteJobStore::Open(path);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }
};

// A temp dir per test, removed afterwards.
class TempDirTest : public ::testing::Test {
 protected:
  TempDirTest() {
    char tmpl[] = "/tmp/job-store-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    path_ = dir_ + "/coordinator.db";
  }
  ~TempDirTest() override { std::filesystem::remove_all(dir_); }
  std::string dir_;
  std::string path_;
};

template <typename T>
class JobStoreTest : public TempDirTest {
 protected:
  JobStoreTest() : store_(T::Open(path_)) {}
  std::unique_ptr<JobStore> store_;
};

using Stores = ::testing::Types<InMemory, Sqlite>;
TYPED_TEST_SUITE(JobStoreTest, Stores);

TYPED_TEST(JobStoreTest, PutThenLoadRoundTripsInFirstWriteOrder) {
  JobStore& store = *this->store_;
  const v1::Job nine = MakeJob("job-9", v1::JOB_STATE_RUNNING);
  ASSERT_TRUE(store.PutJob(MakeJob("job-10", v1::JOB_STATE_QUEUED)).ok());
  ASSERT_TRUE(store.PutJob(nine).ok());
  v1::Job ten = MakeJob("job-10", v1::JOB_STATE_SUCCEEDED);  // upsert
  ten.set_total_steps(300);
  ASSERT_TRUE(store.PutJob(ten).ok());

  StoredState state = *store.LoadAll();
  ASSERT_EQ(state.jobs.size(), 2u);
  EXPECT_TRUE(Same(state.jobs[0].job, ten));
  EXPECT_TRUE(Same(state.jobs[1].job, nine));
  EXPECT_EQ(state.next_job_number, 1);
}

TYPED_TEST(JobStoreTest, EventsComeBackInSeqOrderWithoutDuplicates) {
  JobStore& store = *this->store_;
  ASSERT_TRUE(store.PutJob(MakeJob("job-1", v1::JOB_STATE_RUNNING)).ok());
  ASSERT_TRUE(store.AppendEvent("job-1", MakeEvent("", 2, "two")).ok());
  ASSERT_TRUE(store.AppendEvent("job-1", MakeEvent("", 1, "one")).ok());
  JobWrite replay;  // a replay of seq 2 with other content changes nothing
  replay.events = {MakeEvent("job-1", 2, "again"), MakeEvent("job-1", 3, "x")};
  ASSERT_TRUE(store.Write(replay, Durability::kGrouped).ok());

  StoredState state = *store.LoadAll();
  ASSERT_EQ(state.jobs.size(), 1u);
  EXPECT_THAT(Seqs(state.jobs[0]), ElementsAre(1, 2, 3));
  EXPECT_EQ(state.jobs[0].events[1].log().text(), "two");
  EXPECT_EQ(state.jobs[0].events[1].job_id(), "job-1");
}

TYPED_TEST(JobStoreTest, LoadVisitsEveryEventAndKeepsOnlyTheTail) {
  JobStore& store = *this->store_;
  ASSERT_TRUE(store.PutJob(MakeJob("job-1", v1::JOB_STATE_RUNNING)).ok());
  ASSERT_TRUE(store.PutJob(MakeJob("job-2", v1::JOB_STATE_QUEUED)).ok());
  JobWrite write;
  for (int64_t seq = 1; seq <= 50; ++seq) {
    write.events.push_back(MakeEvent("job-1", seq, std::string(100, 'a')));
  }
  ASSERT_TRUE(store.Write(write, Durability::kImmediate).ok());
  EventScan scan;
  scan.keep_bytes = 5 * MakeEvent("job-1", 50, std::string(100, 'a')).ByteSizeLong();
  std::vector<std::pair<std::string, int64_t>> visited;
  scan.visit = [&](v1::Job& job, const v1::JobEvent& e) {
    visited.emplace_back(job.id(), e.seq());
    job.set_total_steps(e.seq());  // the visitor may update the job
  };
  StoredState state = *store.Load(scan);
  ASSERT_EQ(state.jobs.size(), 2u);
  ASSERT_EQ(visited.size(), 50u);
  for (size_t i = 0; i < visited.size(); ++i) {
    EXPECT_EQ(visited[i], (std::pair<std::string, int64_t>("job-1", i + 1)));
  }
  EXPECT_EQ(state.jobs[0].last_seq, 50);
  EXPECT_THAT(Seqs(state.jobs[0]), ElementsAre(46, 47, 48, 49, 50));
  EXPECT_EQ(state.jobs[0].job.total_steps(), 50);
  EXPECT_EQ(state.jobs[1].last_seq, 0);
  EXPECT_TRUE(state.jobs[1].events.empty());
}

TYPED_TEST(JobStoreTest, ReadEventsPagesThroughAJobsHistory) {
  JobStore& store = *this->store_;
  ASSERT_TRUE(store.PutJob(MakeJob("job-1", v1::JOB_STATE_RUNNING)).ok());
  ASSERT_TRUE(store.PutJob(MakeJob("job-2", v1::JOB_STATE_RUNNING)).ok());
  JobWrite write;
  for (int64_t seq = 1; seq <= 7; ++seq) {
    write.events.push_back(MakeEvent("job-1", seq, "line"));
  }
  write.events.push_back(MakeEvent("job-2", 1, "other"));
  ASSERT_TRUE(store.Write(write, Durability::kGrouped).ok());
  auto seqs = [](const std::vector<v1::JobEvent>& events) {
    std::vector<int64_t> out;
    for (const v1::JobEvent& e : events) out.push_back(e.seq());
    return out;
  };
  EXPECT_THAT(seqs(*store.ReadEvents("job-1", 3, 2)), ElementsAre(3, 4));
  EXPECT_THAT(seqs(*store.ReadEvents("job-1", 6, 100)), ElementsAre(6, 7));
  EXPECT_TRUE(store.ReadEvents("job-1", 8, 100)->empty());
  EXPECT_EQ((*store.ReadEvents("job-1", 1, 1))[0].job_id(), "job-1");
  EXPECT_TRUE(store.ReadEvents("job-404", 1, 100)->empty());
}

TYPED_TEST(JobStoreTest, RendezvousKeysArePutErasedAndDroppedByGeneration) {
  JobStore& store = *this->store_;
  const std::string binary("\0addr\xff", 6);  // keys and values are bytes
  ASSERT_TRUE(store.PutRendezvousKey({"job-1", 1, "0/0", "a"}).ok());
  ASSERT_TRUE(store.PutRendezvousKey({"job-1", 1, "0/0", "b"}).ok());  // replaces
  ASSERT_TRUE(store.PutRendezvousKey({"job-1", 2, binary, binary}).ok());
  ASSERT_TRUE(store.PutRendezvousKey({"job-2", 1, "k", "v"}).ok());
  ASSERT_TRUE(store.PutRendezvousKey({"job-1", 1, "gone", "x"}).ok());
  ASSERT_TRUE(store.EraseRendezvousKey("job-1", 1, "gone").ok());
  std::vector<RendezvousRecord> all = *store.LoadRendezvous();
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].job_id, "job-1");
  EXPECT_EQ(all[0].generation, 1);
  EXPECT_EQ(all[0].value, "b");
  EXPECT_EQ(all[1].key, binary);
  EXPECT_EQ(all[1].value, binary);
  ASSERT_TRUE(store.DropRendezvous("job-1", 2).ok());  // generation 1 only
  all = *store.LoadRendezvous();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].generation, 2);
  EXPECT_EQ(all[1].job_id, "job-2");
}

TYPED_TEST(JobStoreTest, RejectsMalformedAndOrphanRecordsAllOrNothing) {
  JobStore& store = *this->store_;
  EXPECT_EQ(store.PutJob(v1::Job()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.AppendEvent("job-1", MakeEvent("", 0, "")).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.AppendEvent("job-7", MakeEvent("", 1, "")).code(),
            absl::StatusCode::kFailedPrecondition);
  JobWrite write;
  write.jobs = {MakeJob("job-1", v1::JOB_STATE_QUEUED)};
  write.events = {MakeEvent("job-1", 1, ""), MakeEvent("job-7", 1, "")};
  write.next_job_number = 9;
  EXPECT_EQ(store.Write(write, Durability::kImmediate).code(),
            absl::StatusCode::kFailedPrecondition);
  StoredState state = *store.LoadAll();
  EXPECT_TRUE(state.jobs.empty());
  EXPECT_EQ(state.next_job_number, 1);
  // The job and its events in one write is fine.
  write.events.pop_back();
  EXPECT_TRUE(store.Write(write, Durability::kImmediate).ok());
  EXPECT_EQ(store.LoadAll()->jobs.size(), 1u);
}

TYPED_TEST(JobStoreTest, NextJobNumberOnlyGrows) {
  JobStore& store = *this->store_;
  JobWrite write;
  write.jobs = {MakeJob("job-4", v1::JOB_STATE_QUEUED)};
  write.next_job_number = 5;
  ASSERT_TRUE(store.Write(write, Durability::kImmediate).ok());
  write.next_job_number = 3;
  ASSERT_TRUE(store.Write(write, Durability::kGrouped).ok());
  ASSERT_TRUE(store.Flush().ok());
  EXPECT_EQ(store.LoadAll()->next_job_number, 5);
}

TYPED_TEST(JobStoreTest, CheckpointCatalog) {
  JobStore& store = *this->store_;
  ASSERT_TRUE(store.PutJob(MakeJob("job-1", v1::JOB_STATE_RUNNING)).ok());
  CheckpointRecord c{"job-1", 200, "/ckpt/200", 1000, 0.5};
  ASSERT_TRUE(store.PutCheckpoint(c).ok());
  ASSERT_TRUE(store.PutCheckpoint({"job-1", 100, "/ckpt/old", 900, {}}).ok());
  ASSERT_TRUE(store.PutCheckpoint({"job-1", 100, "/ckpt/100", 950, {}}).ok());
  EXPECT_EQ(store.PutCheckpoint({"job-2", 1, "/x", 1, {}}).code(),
            absl::StatusCode::kFailedPrecondition);

  std::vector<CheckpointRecord> list = *store.ListCheckpoints("job-1");
  EXPECT_THAT(Steps(list), ElementsAre(100, 200));
  EXPECT_EQ(list[0].path, "/ckpt/100");
  EXPECT_EQ(list[0].created_unix_ms, 950);
  EXPECT_FALSE(list[0].metric.has_value());
  EXPECT_EQ(list[1].job_id, "job-1");
  EXPECT_DOUBLE_EQ(list[1].metric.value_or(-1), 0.5);
  EXPECT_TRUE(store.ListCheckpoints("job-2")->empty());

  EXPECT_TRUE(store.DeleteCheckpoint("job-1", 100).ok());
  EXPECT_EQ(store.DeleteCheckpoint("job-1", 100).code(),
            absl::StatusCode::kNotFound);
  EXPECT_THAT(Steps(*store.ListCheckpoints("job-1")), ElementsAre(200));
}

// --- SQLite only ---

using SqliteJobStoreTest = TempDirTest;

TEST_F(SqliteJobStoreTest, ReopenKeepsEverythingIncludingGroupedWrites) {
  {
    auto store = *SqliteJobStore::Open(path_);
    JobWrite write;
    write.jobs = {MakeJob("job-1", v1::JOB_STATE_SUCCEEDED)};
    write.events = {MakeEvent("job-1", 1, "a")};
    write.next_job_number = 2;
    ASSERT_TRUE(store->Write(write, Durability::kImmediate).ok());
    write.jobs.clear();
    write.events = {MakeEvent("job-1", 2, "b")};
    ASSERT_TRUE(store->Write(write, Durability::kGrouped).ok());
    ASSERT_TRUE(store->PutCheckpoint({"job-1", 5, "/c", 1, 2.0}).ok());
  }  // closing commits the grouped write
  auto store = *SqliteJobStore::Open(path_);
  StoredState state = *store->LoadAll();
  ASSERT_EQ(state.jobs.size(), 1u);
  EXPECT_TRUE(
      Same(state.jobs[0].job, MakeJob("job-1", v1::JOB_STATE_SUCCEEDED)));
  EXPECT_THAT(Seqs(state.jobs[0]), ElementsAre(1, 2));
  EXPECT_EQ(state.next_job_number, 2);
  EXPECT_THAT(Steps(*store->ListCheckpoints("job-1")), ElementsAre(5));
}

TEST_F(SqliteJobStoreTest, ImmediateWritesSurviveKill9) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The parent has not opened the file: this is the only connection.
    auto store = SqliteJobStore::Open(path_, {/*group_commit_ms=*/60'000});
    if (!store.ok()) _exit(2);
    JobWrite write;
    write.jobs = {MakeJob("job-1", v1::JOB_STATE_QUEUED)};
    write.events = {MakeEvent("job-1", 1, "a")};
    if (!(*store)->Write(write, Durability::kImmediate).ok()) _exit(3);
    // A rendezvous key is durable when Put returns, as a submission is.
    if (!(*store)->PutRendezvousKey({"job-1", 1, "0/0", "10.0.0.1:4000"}).ok()) {
      _exit(6);
    }
    write.events = {MakeEvent("job-1", 2, "grouped, not yet committed")};
    if (!(*store)->Write(write, Durability::kGrouped).ok()) _exit(4);
    kill(getpid(), SIGKILL);
    _exit(5);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited " << WEXITSTATUS(status);
  auto store = SqliteJobStore::Open(path_);
  ASSERT_TRUE(store.ok()) << store.status();
  StoredState state = *(*store)->LoadAll();
  ASSERT_EQ(state.jobs.size(), 1u);
  EXPECT_THAT(Seqs(state.jobs[0]), ElementsAre(1));  // the window was lost
  std::vector<RendezvousRecord> keys = *(*store)->LoadRendezvous();
  ASSERT_EQ(keys.size(), 1u);
  EXPECT_EQ(keys[0].value, "10.0.0.1:4000");
}

// A state file of schema version 2 (before the rendezvous table) opens,
// keeps its jobs, and keeps rendezvous keys from then on.
TEST_F(SqliteJobStoreTest, AVersion2FileIsBroughtUpToVersion3) {
  {
    auto store = *SqliteJobStore::Open(path_);
    ASSERT_TRUE(store->PutJob(MakeJob("job-1", v1::JOB_STATE_RUNNING)).ok());
  }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "DROP TABLE rendezvous; PRAGMA user_version = 2",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto store = SqliteJobStore::Open(path_);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->LoadAll()->jobs.size(), 1u);
  ASSERT_TRUE((*store)->PutRendezvousKey({"job-1", 1, "k", "v"}).ok());
  EXPECT_EQ((*store)->LoadRendezvous()->size(), 1u);
}

TEST_F(SqliteJobStoreTest, GarbageFileGivesAClearError) {
  std::ofstream(path_) << std::string(8192, 'x');
  auto store = SqliteJobStore::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kDataLoss);
  const std::string message(store.status().message());
  EXPECT_THAT(message, HasSubstr(path_));
  EXPECT_THAT(message, HasSubstr("not a database"));
  EXPECT_THAT(message, HasSubstr("move it aside"));
}

TEST_F(SqliteJobStoreTest, NewerSchemaIsRefused) {
  ASSERT_TRUE(SqliteJobStore::Open(path_).ok());
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(
      sqlite3_exec(db, "PRAGMA user_version = 7", nullptr, nullptr, nullptr),
      SQLITE_OK);
  sqlite3_close(db);
  auto store = SqliteJobStore::Open(path_);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(store.status().message()),
              HasSubstr(path_ + " has schema version 7"));
}

TEST_F(SqliteJobStoreTest, ForeignSqliteFileIsRefused) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path_.c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "CREATE TABLE t(x)", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto store = SqliteJobStore::Open(path_);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(store.status().message()),
              HasSubstr("not a trainctl state database"));
}

// Commits do not checkpoint; the background thread does, on its own
// connection: the database file takes in what was committed while the
// store stays open.
TEST_F(SqliteJobStoreTest, CheckpointsHappenInTheBackgroundWhileOpen) {
  SqliteJobStore::Options options;
  options.checkpoint_pages = 16;
  auto store = SqliteJobStore::Open(path_, options);
  ASSERT_TRUE(store.ok()) << store.status();
  const auto file_size = [this] { return std::filesystem::file_size(path_); };
  const uintmax_t empty = file_size();
  ASSERT_TRUE((*store)->PutJob(MakeJob("job-1", v1::JOB_STATE_RUNNING)).ok());
  for (int64_t seq = 1; seq <= 400; ++seq) {  // ~100 pages of events
    JobWrite write;
    v1::JobEvent event = MakeEvent("job-1", seq, std::string(900, 'x'));
    write.events.push_back(event);
    ASSERT_TRUE((*store)->Write(write, Durability::kImmediate).ok());
  }
  // Bounded wait for the thread; the size asserts that it ran.
  for (int i = 0; i < 1000 && file_size() < empty + 256 * 1024; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(file_size(), empty + 256 * 1024);
  EXPECT_EQ((*store)->ReadEvents("job-1", 1, 1000)->size(), 400u);
}

TEST_F(SqliteJobStoreTest, SecondStoreOnTheSameFileIsRefusedWhileOpen) {
  auto first = SqliteJobStore::Open(path_);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = SqliteJobStore::Open(path_);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(second.status().message()),
              HasSubstr("Another trainctl-coordinator"));
}

}  // namespace
}  // namespace trainctl::coordinator
