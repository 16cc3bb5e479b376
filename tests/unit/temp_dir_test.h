#pragma once

// A fixture whose tests each get a fresh temporary directory for the files
// they write, removed afterwards. Torch-free, and free of std::filesystem
// (tests/common/scoped_temp_dir.h says why).

#include <gtest/gtest.h>
#include <stdlib.h>
#include <zlib.h>

#include <fstream>
#include <string>

#include "common/atomic_file.h"

namespace trainctl::testing {

class TempDirTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmpdir = getenv("TMPDIR");
    std::string tmpl = std::string(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp") +
                       "/trainctl_test.XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { EXPECT_TRUE(RemoveTree(dir_).ok()) << dir_; }

  // Writes `bytes` to dir_/name, gzip-compressed when asked; returns the
  // path.
  std::string Write(const std::string& name, const std::string& bytes,
                    bool gzip = false) {
    const std::string path = dir_ + "/" + name;
    if (!gzip) {
      std::ofstream(path, std::ios::binary) << bytes;
      return path;
    }
    gzFile f = gzopen(path.c_str(), "wb");
    EXPECT_EQ(gzwrite(f, bytes.data(), bytes.size()), int(bytes.size()));
    gzclose(f);
    return path;
  }

  std::string dir_;
};

}  // namespace trainctl::testing
