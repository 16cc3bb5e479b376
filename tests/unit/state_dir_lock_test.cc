// One worker per state directory, and a default directory per worker name.

#include "worker/agent/state_dir_lock.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/common/scoped_temp_dir.h"

namespace trainctl::agent {
namespace {

using ::testing::HasSubstr;
using trainctl::testing::ScopedTempDir;

TEST(StateDirLockTest, ASecondHolderIsRefusedNamingTheDirectoryAndPid) {
  const ScopedTempDir temp("state-dir-lock");
  const std::string dir = temp.path() + "/node-a";
  absl::StatusOr<StateDirLock> first = StateDirLock::Acquire(dir);
  ASSERT_TRUE(first.ok()) << first.status();
  struct stat st;
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  // flock locks belong to the open file: a second open conflicts even in
  // this process, as another worker's would.
  absl::StatusOr<StateDirLock> second = StateDirLock::Acquire(dir);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr(dir));
  EXPECT_THAT(second.status().message(),
              HasSubstr(absl::StrCat("(pid ", getpid(), ")")));
}

TEST(StateDirLockTest, ReleasedWhenTheHolderGoes) {
  const ScopedTempDir temp("state-dir-lock");
  const std::string& dir = temp.path();
  {
    absl::StatusOr<StateDirLock> first = StateDirLock::Acquire(dir);
    ASSERT_TRUE(first.ok()) << first.status();
    StateDirLock moved = *std::move(first);  // still held after a move
    EXPECT_FALSE(StateDirLock::Acquire(dir).ok());
  }
  EXPECT_TRUE(StateDirLock::Acquire(dir).ok());
}

TEST(StateDirLockTest, DefaultDirectoryIsPerWorkerName) {
  const char* saved = getenv("XDG_STATE_HOME");
  const std::string restore = saved != nullptr ? saved : "";
  const char* saved_home = getenv("HOME");
  const std::string restore_home = saved_home != nullptr ? saved_home : "";
  setenv("XDG_STATE_HOME", "/var/lib", 1);
  EXPECT_EQ(DefaultWorkerStateDir("node-a"), "/var/lib/trainctl-worker/node-a");
  EXPECT_NE(DefaultWorkerStateDir("node-a"), DefaultWorkerStateDir("node-b"));
  EXPECT_EQ(DefaultWorkerStateDir("a/../b"), "/var/lib/trainctl-worker/a_.._b");
  EXPECT_EQ(DefaultWorkerStateDir(".."), "/var/lib/trainctl-worker/_..");
  unsetenv("XDG_STATE_HOME");
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(DefaultWorkerStateDir("n"), "/home/u/.local/state/trainctl-worker/n");
  if (saved != nullptr) setenv("XDG_STATE_HOME", restore.c_str(), 1);
  if (saved_home != nullptr) setenv("HOME", restore_home.c_str(), 1);
}

}  // namespace
}  // namespace trainctl::agent
