// auth/workers: each worker name pinned to one key and the slots it joined
// with, and edits by the running coordinator (Admit) and an admin's
// forget-worker never losing each other's lines.

#include "coordinator/auth/worker_enrollment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "common/atomic_file.h"
#include "tests/unit/temp_dir_test.h"

namespace trainctl::coordinator::auth {
namespace {

class WorkerEnrollmentTest : public trainctl::testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    ASSERT_EQ(mkdir((dir_ + "/auth").c_str(), 0700), 0);
  }
  std::string Path() const { return dir_ + "/auth/workers"; }
  std::set<std::string> Names() {
    std::set<std::string> names;
    std::istringstream lines(ReadWholeFile(Path()).value_or(""));
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty() && line[0] != '#') {
        names.insert(line.substr(0, line.find(' ')));
      }
    }
    return names;
  }
};

TEST_F(WorkerEnrollmentTest, ANameIsPinnedToItsKeyAndItsSlots) {
  WorkerEnrollment enrollment(Path());
  ASSERT_TRUE(enrollment.Admit("node-a", "key1", 4).ok());
  EXPECT_EQ(*enrollment.EnrolledSlots("node-a"), 4);
  EXPECT_EQ(enrollment.Admit("node-a", "key2", 4).code(),
            absl::StatusCode::kPermissionDenied);
  ASSERT_TRUE(enrollment.Admit("node-a", "key1", 8).ok());  // same key: renew
  EXPECT_EQ(*enrollment.EnrolledSlots("node-a"), 8);
  EXPECT_EQ(enrollment.EnrolledSlots("node-b").status().code(),
            absl::StatusCode::kNotFound);
  ASSERT_TRUE(ForgetWorker(dir_, "node-a").ok());
  EXPECT_TRUE(enrollment.Admit("node-a", "key2", 1).ok());
}

TEST_F(WorkerEnrollmentTest, AdmitAndForgetAtOnceLoseNoLine) {
  WorkerEnrollment enrollment(Path());
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(enrollment.Admit("old-" + std::to_string(i), "k", 1).ok());
  }
  std::thread admit([&] {
    for (int i = 0; i < 100; ++i) {
      EXPECT_TRUE(enrollment.Admit("new-" + std::to_string(i), "k", 1).ok());
    }
  });
  std::thread forget([&] {  // what `trainctl-coordinator forget-worker` does
    for (int i = 0; i < 100; ++i) {
      EXPECT_TRUE(ForgetWorker(dir_, "old-" + std::to_string(i)).ok());
    }
  });
  admit.join();
  forget.join();
  std::set<std::string> want;
  for (int i = 0; i < 100; ++i) want.insert("new-" + std::to_string(i));
  EXPECT_EQ(Names(), want);
}

}  // namespace
}  // namespace trainctl::coordinator::auth
