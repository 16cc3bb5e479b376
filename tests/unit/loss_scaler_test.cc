#include "worker/train/loss_scaler.h"

#include <gtest/gtest.h>

#include <limits>

namespace trainctl::train {
namespace {

std::vector<torch::Tensor> ParamsWithGrad(float grad_value) {
  torch::Tensor p = torch::zeros({3}, torch::requires_grad());
  p.mutable_grad() = torch::full({3}, grad_value);
  return {p};
}

TEST(DynamicLossScalerTest, UnscalesFiniteGradients) {
  DynamicLossScaler scaler(8.0, 2);
  auto params = ParamsWithGrad(4.0f);
  EXPECT_TRUE(scaler.Unscale(params));
  EXPECT_FLOAT_EQ(params[0].grad()[0].item<float>(), 0.5f);
}

TEST(DynamicLossScalerTest, InfOrNanHalvesTheScaleAndCountsASkip) {
  DynamicLossScaler scaler(8.0, 2);
  EXPECT_FALSE(scaler.Unscale(ParamsWithGrad(std::numeric_limits<float>::infinity())));
  scaler.Update(false);
  EXPECT_DOUBLE_EQ(scaler.scale(), 4.0);
  EXPECT_FALSE(scaler.Unscale(ParamsWithGrad(std::nanf(""))));
  scaler.Update(false);
  EXPECT_DOUBLE_EQ(scaler.scale(), 2.0);
  EXPECT_EQ(scaler.skipped_steps(), 2);
}

TEST(DynamicLossScalerTest, GrowsAfterTheIntervalOfGoodSteps) {
  DynamicLossScaler scaler(8.0, 2);
  scaler.Update(true);
  EXPECT_DOUBLE_EQ(scaler.scale(), 8.0);
  scaler.Update(true);
  EXPECT_DOUBLE_EQ(scaler.scale(), 16.0);
  scaler.Update(false);
  scaler.Update(true);
  EXPECT_DOUBLE_EQ(scaler.scale(), 8.0);  // the streak restarted
}

}  // namespace
}  // namespace trainctl::train
