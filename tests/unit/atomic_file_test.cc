#include "common/atomic_file.h"

#include <dirent.h>
#include <sys/wait.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace trainctl {
namespace {

class AtomicFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/atomic_file_test.XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::system(("rm -rf " + dir_).c_str());
  }
  std::string dir_;
};

TEST_F(AtomicFileTest, WritesReplacesAndReadsBack) {
  const std::string path = dir_ + "/a.ckpt";
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "second, longer").ok());
  EXPECT_EQ(*ReadWholeFile(path), "second, longer");
  EXPECT_EQ(ReadWholeFile(dir_ + "/none").status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(AtomicFileTest, AWriterThatDiesHalfwayLeavesTheOldFile) {
  const std::string path = dir_ + "/a.ckpt";
  ASSERT_TRUE(WriteFileAtomically(path, "old contents").ok());
  const pid_t child = fork();
  if (child == 0) {
    (void)WriteFileAtomically(path, std::string(1 << 20, 'x'), [] { _exit(9); });
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_EQ(WEXITSTATUS(status), 9);
  EXPECT_EQ(*ReadWholeFile(path), "old contents");
  EXPECT_EQ(RemoveStaleTemporaries(dir_), 1);
  EXPECT_EQ(RemoveStaleTemporaries(dir_), 0);
  EXPECT_EQ(*ReadWholeFile(path), "old contents");
}

// Content written piece by piece as it is produced; a producer that fails
// partway leaves the old file and no temporary.
TEST_F(AtomicFileTest, StreamedContentIsWholeOrNotThere) {
  const std::string path = dir_ + "/a.ckpt";
  AtomicWriteOptions options;
  ASSERT_TRUE(WriteFileAtomicallyStreamed(
                  path,
                  [](const ByteSink& sink) {
                    for (const char* piece : {"one ", "two ", "three"}) {
                      absl::Status s = sink(piece, std::string(piece).size());
                      if (!s.ok()) return s;
                    }
                    return absl::OkStatus();
                  },
                  options)
                  .ok());
  EXPECT_EQ(*ReadWholeFile(path), "one two three");
  absl::Status failed = WriteFileAtomicallyStreamed(
      path,
      [](const ByteSink& sink) {
        absl::Status s = sink("partial", 7);
        if (!s.ok()) return s;
        return absl::DataLossError("the producer gave up");
      },
      options);
  EXPECT_EQ(failed.code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(*ReadWholeFile(path), "one two three");
  EXPECT_EQ(RemoveStaleTemporaries(dir_), 0);
}

TEST_F(AtomicFileTest, ErrorsNameThePath) {
  absl::Status s = WriteFileAtomically(dir_ + "/missing/dir/a.ckpt", "x");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(std::string(s.message()).find(dir_ + "/missing/dir"),
            std::string::npos);
}

TEST_F(AtomicFileTest, MakeDirsCreatesNestedDirectoriesOnce) {
  ASSERT_TRUE(MakeDirs(dir_ + "/x/y/z").ok());
  ASSERT_TRUE(MakeDirs(dir_ + "/x/y/z").ok());
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/x/file", "f").ok());
  EXPECT_EQ(MakeDirs(dir_ + "/x/file").code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(AtomicFileTest, MakeDirsKeepsARelativePathRelative) {
  char cwd[4096];
  ASSERT_NE(getcwd(cwd, sizeof(cwd)), nullptr);
  ASSERT_EQ(chdir(dir_.c_str()), 0);
  const absl::Status made = MakeDirs("rel/a/b");
  ASSERT_EQ(chdir(cwd), 0);
  ASSERT_TRUE(made.ok()) << made;
  struct stat st;
  EXPECT_EQ(stat((dir_ + "/rel/a/b").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
}

TEST_F(AtomicFileTest, RemoveTreeRemovesEverythingButFollowsNoLink) {
  ASSERT_TRUE(MakeDirs(dir_ + "/tree/a/b").ok());
  ASSERT_TRUE(MakeDirs(dir_ + "/outside").ok());
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/tree/a/b/deep.txt", "x").ok());
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/tree/top.txt", "y").ok());
  ASSERT_TRUE(WriteFileAtomically(dir_ + "/outside/kept.txt", "z").ok());
  ASSERT_EQ(::symlink((dir_ + "/outside").c_str(), (dir_ + "/tree/a/link").c_str()), 0);
  ASSERT_TRUE(RemoveTree(dir_ + "/tree").ok());
  struct stat st;
  EXPECT_NE(::lstat((dir_ + "/tree").c_str(), &st), 0);
  EXPECT_EQ(*ReadWholeFile(dir_ + "/outside/kept.txt"), "z");  // the link, not its target
  // Absent is done; a file is removed as one.
  EXPECT_TRUE(RemoveTree(dir_ + "/tree").ok());
  EXPECT_TRUE(RemoveTree(dir_ + "/outside/kept.txt").ok());
  EXPECT_NE(::lstat((dir_ + "/outside/kept.txt").c_str(), &st), 0);
}

TEST(IsInsideDirTest, ResolvesDotsLexically) {
  EXPECT_TRUE(IsInsideDir("/ckpt/job-1/step-1.ckpt", "/ckpt/job-1"));
  EXPECT_TRUE(IsInsideDir("/ckpt/job-1/./a/../step.ckpt", "/ckpt/job-1/"));
  EXPECT_FALSE(IsInsideDir("/ckpt/job-1/../job-2/step.ckpt", "/ckpt/job-1"));
  EXPECT_FALSE(IsInsideDir("/ckpt/job-10/step.ckpt", "/ckpt/job-1"));
  EXPECT_FALSE(IsInsideDir("relative/step.ckpt", "/ckpt"));
  EXPECT_FALSE(IsInsideDir("/etc/passwd", "/ckpt"));
}

}  // namespace
}  // namespace trainctl
