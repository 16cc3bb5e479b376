#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <string>

#include "worker/train/device.h"

namespace trainctl::train {

// Skips, saying why, unless a GPU is visible; binds cuda:0.
class GpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (torch::cuda::device_count() == 0) {
      const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
      GTEST_SKIP() << "no GPU visible (CUDA_VISIBLE_DEVICES="
                   << (visible ? visible : "unset")
                   << "): the gpu tests run on a GPU node (bench/gpu_check.sh)";
    }
    BindDevice(device_);
  }
  const torch::Device device_{torch::kCUDA, 0};
};

}  // namespace trainctl::train
