#pragma once

// A fresh directory for one test's files, removed with everything in it when
// the object goes, so a suite run leaves nothing behind: CI machines can be
// short of disk, and a suite that leaked its clusters' state and checkpoints
// filled them. Kept, and its path printed, when the test failed or
// TRAINCTL_KEEP_TEST_DIRS is set, for whoever debugs it. Torch-free, and
// free of std::filesystem, which a test linked with the torch 2.x wheel can
// bind to the wheel's copy (common/atomic_file.h).

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <iostream>
#include <string>

#include "common/atomic_file.h"

namespace trainctl::testing {

class ScopedTempDir {
 public:
  // Under $TMPDIR (else /tmp), named `prefix` plus a unique suffix.
  explicit ScopedTempDir(const std::string& prefix) {
    const char* tmpdir = getenv("TMPDIR");
    std::string pattern =
        std::string(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp") + "/" + prefix + ".XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp " << pattern << " failed";
      return;
    }
    path_ = pattern;
  }
  ~ScopedTempDir() {
    if (path_.empty()) return;
    if (::testing::Test::HasFailure() || getenv("TRAINCTL_KEEP_TEST_DIRS")) {
      std::cerr << "kept " << path_ << " for inspection\n";
      return;
    }
    (void)RemoveTree(path_);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace trainctl::testing
