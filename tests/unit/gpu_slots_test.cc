#include "worker/agent/gpu_slots.h"

#include <gtest/gtest.h>

#include "tests/unit/temp_dir_test.h"

namespace trainctl::agent {
namespace {

using Gpus = std::vector<std::string>;

class GpuSlotsTest : public trainctl::testing::TempDirTest {};

TEST_F(GpuSlotsTest, AutoCountsDeviceNodesAndNumbersThemFromZero) {
  // A container that was given the host's GPUs 2 and 5 sees those nodes;
  // CUDA numbers them 0 and 1.
  Write("nvidia2", "");
  Write("nvidia5", "");
  Write("nvidiactl", "");
  EXPECT_EQ(*ParseGpus("auto", nullptr, dir_), (Gpus{"0", "1"}));
}

TEST_F(GpuSlotsTest, AutoWithoutGpusIsNone) {
  EXPECT_EQ(*ParseGpus("auto", nullptr, dir_), Gpus{});
  EXPECT_EQ(*ParseGpus("none", nullptr, dir_), Gpus{});
}

TEST_F(GpuSlotsTest, AutoFollowsTheAgentsCudaVisibleDevices) {
  Write("nvidia0", "");
  EXPECT_EQ(*ParseGpus("auto", "3,1", dir_), (Gpus{"3", "1"}));
  EXPECT_EQ(*ParseGpus("auto", "GPU-8f2c-11", dir_), (Gpus{"GPU-8f2c-11"}));
  EXPECT_EQ(*ParseGpus("auto", "", dir_), Gpus{});
  EXPECT_EQ(*ParseGpus("auto", "-1", dir_), Gpus{});
}

TEST_F(GpuSlotsTest, ExplicitListKeepsItsOrder) {
  EXPECT_EQ(*ParseGpus("2, 0,1", nullptr, dir_), (Gpus{"2", "0", "1"}));
}

TEST_F(GpuSlotsTest, BadListsNameTheEntry) {
  auto twice = ParseGpus("0,1,0", nullptr, dir_);
  ASSERT_FALSE(twice.ok());
  EXPECT_EQ(twice.status().message(), "--gpus: GPU 0 is listed twice");
  auto bad = ParseGpus("0,;rm", nullptr, dir_);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            "--gpus: ';rm' is not a GPU id (a CUDA device number or a GPU UUID)");
  auto empty = ParseGpus("0,,1", nullptr, dir_);
  ASSERT_FALSE(empty.ok());
  auto env = ParseGpus("auto", "0 1", dir_);
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.status().message().find("CUDA_VISIBLE_DEVICES"), std::string::npos);
}

TEST(GpuPoolTest, HandsOutEachGpuOnceAndTakesThemBack) {
  GpuPool pool({"0", "1"});
  EXPECT_EQ(pool.Take(), "0");
  EXPECT_EQ(pool.Take(), "1");
  EXPECT_EQ(pool.Take(), std::nullopt);
  pool.Give("0");
  EXPECT_EQ(pool.free_count(), 1);
  EXPECT_EQ(pool.Take(), "0");
}

}  // namespace
}  // namespace trainctl::agent
