#pragma once

// A fresh directory for one test's files, removed with everything in it when
// the object goes, so a suite run leaves nothing behind: CI machines can be
// short of disk, and a suite that leaked its clusters' state and checkpoints
// filled them. Kept, and its path printed, when the test failed or
// TRAINCTL_KEEP_TEST_DIRS is set, for whoever debugs it. Torch-free.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>

namespace trainctl::testing {

class ScopedTempDir {
 public:
  // Under $TMPDIR (else /tmp), named `prefix` plus a unique suffix.
  explicit ScopedTempDir(const std::string& prefix) {
    std::error_code error;
    std::filesystem::path base = std::filesystem::temp_directory_path(error);
    if (error) base = "/tmp";
    std::string pattern = (base / (prefix + ".XXXXXX")).string();
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
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace trainctl::testing
