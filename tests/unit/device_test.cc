#include "worker/train/device.h"

#include <gtest/gtest.h>

namespace trainctl::train {
namespace {

TEST(DeviceTest, CpuAndAutoWithoutAGpuTrainOnTheCpu) {
  if (torch::cuda::device_count() > 0) GTEST_SKIP() << "a GPU is visible";
  EXPECT_EQ(*ResolveDevice("cpu", 0), torch::Device(torch::kCPU));
  EXPECT_EQ(*ResolveDevice("auto", 3), torch::Device(torch::kCPU));
}

// `device: cuda` never falls back to the CPU: the rank fails (exit 78, a
// configuration error) saying why.
TEST(DeviceTest, CudaWithoutAGpuIsAnErrorThatSaysWhy) {
  if (torch::cuda::device_count() > 0) GTEST_SKIP() << "a GPU is visible";
  absl::StatusOr<torch::Device> device = ResolveDevice("cuda", 0);
  ASSERT_FALSE(device.ok());
  EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string message(device.status().message());
  EXPECT_EQ(message.rfind("training.device: cuda, but this ", 0), 0u) << message;
#ifdef TRAINCTL_WITH_CUDA
  EXPECT_NE(message.find("sees no GPU"), std::string::npos) << message;
#else
  EXPECT_NE(message.find("built without CUDA"), std::string::npos) << message;
#endif
}

TEST(DeviceTest, CpuGeneratorStateRoundTrips) {
  const torch::Tensor state = GeneratorState(torch::kCPU);
  const torch::Tensor first = torch::rand({8});
  SetGeneratorState(torch::kCPU, state);
  EXPECT_TRUE(torch::equal(first, torch::rand({8})));
}

}  // namespace
}  // namespace trainctl::train
