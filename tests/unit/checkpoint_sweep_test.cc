#include "worker/agent/checkpoint_sweep.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tests/common/scoped_temp_dir.h"

namespace trainctl::agent {
namespace {

TEST(CheckpointSweepTest, OnlyOlderStepFilesTheCatalogNoLongerKeeps) {
  const testing::ScopedTempDir temp("checkpoint-sweep");
  const std::string dir = temp.path() + "/job-1";
  std::filesystem::create_directories(dir + "/step-000000002.ckpt.d");
  for (const char* name :
       {"step-000000001.ckpt", "step-5.ckpt", "step-000000010.ckpt",
        "step-000000020.ckpt", "step-x.ckpt", "notes.txt",
        ".step-000000003.ckpt.tmp-42", "step-.ckpt"}) {
    std::ofstream(dir + "/" + name) << "bytes";
  }
  v1::DeleteCheckpoints request;
  request.set_dir(dir);
  request.set_stale_below_step(10);
  request.add_keep(dir + "/step-5.ckpt");  // e.g. the best by eval
  request.add_keep(dir + "/step-000000010.ckpt");
  request.add_keep(dir + "/step-000000020.ckpt");
  EXPECT_EQ(StaleCheckpoints(request),
            (std::vector<std::string>{dir + "/step-000000001.ckpt"}));
  request.set_stale_below_step(0);  // an agent's old coordinator: none
  EXPECT_TRUE(StaleCheckpoints(request).empty());
}

}  // namespace
}  // namespace trainctl::agent
