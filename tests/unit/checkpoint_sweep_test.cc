#include "worker/agent/checkpoint_sweep.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/checkpoint_name.h"
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
        ".step-000000003.ckpt.tmp-42", "step-.ckpt",
        // With the generation that wrote them, a fenced one's among them.
        "step-000000004-g1.ckpt", "step-000000006-g2.ckpt", "step-000000007-g.ckpt",
        "step-000000008-g0.ckpt", "step-000000012-g2.ckpt"}) {
    std::ofstream(dir + "/" + name) << "bytes";
  }
  v1::DeleteCheckpoints request;
  request.set_dir(dir);
  request.set_stale_below_step(10);
  request.add_keep(dir + "/step-5.ckpt");  // e.g. the best by eval
  request.add_keep(dir + "/step-000000010.ckpt");
  request.add_keep(dir + "/step-000000020.ckpt");
  request.add_keep(dir + "/step-000000006-g2.ckpt");
  EXPECT_EQ(StaleCheckpoints(request),
            (std::vector<std::string>{dir + "/step-000000001.ckpt",
                                      dir + "/step-000000004-g1.ckpt"}));
  request.set_stale_below_step(0);  // an agent's old coordinator: none
  EXPECT_TRUE(StaleCheckpoints(request).empty());
}

TEST(CheckpointNameTest, StepAndGenerationRoundTrip) {
  EXPECT_EQ(CheckpointFileName(40, 2), "step-000000040-g2.ckpt");
  std::optional<CheckpointName> parsed = ParseCheckpointFileName("step-000000040-g2.ckpt");
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->step, 40);
  EXPECT_EQ(parsed->generation, 2);
  parsed = ParseCheckpointFileName("step-000000040.ckpt");  // before generations
  ASSERT_TRUE(parsed);
  EXPECT_EQ(parsed->step, 40);
  EXPECT_EQ(parsed->generation, 0);
  for (const char* bad : {"step--g2.ckpt", "step-40-g.ckpt", "step-40-g0.ckpt",
                          "step-40-gx.ckpt", "step-4a.ckpt", "step-40.ckpt.tmp-1",
                          "step-40-g2-g3.ckpt", "x-40.ckpt"}) {
    EXPECT_FALSE(ParseCheckpointFileName(bad)) << bad;
  }
}

TEST(CheckpointNameTest, RefIsJobOrJobColonStep) {
  absl::StatusOr<CheckpointRef> ref = ParseCheckpointRef("job-3", "export");
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->job_id, "job-3");
  EXPECT_FALSE(ref->step);
  ref = ParseCheckpointRef("job-3:40", "export");
  ASSERT_TRUE(ref.ok()) << ref.status();
  EXPECT_EQ(ref->job_id, "job-3");
  EXPECT_EQ(ref->step, 40);
  for (const char* bad : {"job-3:", "job-3:x", "job-3:-1", ":40", "", "job-3:4:0"}) {
    ref = ParseCheckpointRef(bad, "export");
    ASSERT_FALSE(ref.ok()) << bad;
    EXPECT_EQ(ref.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(ref.status().message()),
                ::testing::StartsWith("export: '" + std::string(bad) + "'"));
  }
}

}  // namespace
}  // namespace trainctl::agent
