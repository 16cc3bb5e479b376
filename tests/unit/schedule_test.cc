#include "worker/train/optim/schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "worker/train/optim/optimizers.h"

namespace trainctl::train {
namespace {

constexpr double kLr = 0.1;
constexpr double kMinLr = 0.001;
constexpr int64_t kTotal = 101;  // steps 0..100; the last step is 100

v1::SchedulerSpec Spec(const std::string& type, int64_t warmup,
                       double min_lr = 0.0) {
  v1::SchedulerSpec s;
  s.set_type(type);
  s.set_warmup_steps(warmup);
  s.set_min_lr(min_lr);
  return s;
}

double Cosine(double progress) {
  return kMinLr + (kLr - kMinLr) * 0.5 * (1.0 + std::cos(M_PI * progress));
}

TEST(ScheduleTest, ConstantWithoutWarmup) {
  const auto s = Spec("constant", 0);
  for (int64_t step : {0, 1, 50, 100}) {
    EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, step, kTotal), kLr) << step;
  }
}

TEST(ScheduleTest, ConstantWithWarmup) {
  const auto s = Spec("constant", 10);
  EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, 0, kTotal), kLr * 1 / 10);
  EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, 4, kTotal), kLr * 5 / 10);
  EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, 9, kTotal), kLr);  // end of warm-up
  EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, 10, kTotal), kLr);
  EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, 55, kTotal), kLr);
  EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, 100, kTotal), kLr);
}

TEST(ScheduleTest, LinearWithoutWarmupEndsAtExactlyZero) {
  const auto s = Spec("linear", 0);
  EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, 0, kTotal), kLr);
  EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, 25, kTotal), kLr * 0.75);
  EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, 50, kTotal), kLr * 0.5);
  EXPECT_EQ(ScheduledLr(s, kLr, 100, kTotal), 0.0);
}

TEST(ScheduleTest, LinearWithWarmup) {
  const auto s = Spec("linear", 10);
  EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, 0, kTotal), kLr / 10);
  EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, 9, kTotal), kLr);
  // Decay runs over steps 10..100 (90 intervals).
  EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, 10, kTotal), kLr);
  EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, 55, kTotal), kLr * 0.5);
  EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, 82, kTotal), kLr * (1.0 - 72.0 / 90.0));
  EXPECT_EQ(ScheduledLr(s, kLr, 100, kTotal), 0.0);
}

TEST(ScheduleTest, CosineWithoutWarmup) {
  const auto s = Spec("cosine", 0, kMinLr);
  EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, 0, kTotal), kLr);
  EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, 25, kTotal), Cosine(0.25));
  EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, 50, kTotal), (kLr + kMinLr) / 2);
  EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, 100, kTotal), kMinLr);
}

TEST(ScheduleTest, CosineWithWarmup) {
  const auto s = Spec("cosine", 10, kMinLr);
  EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, 0, kTotal), kLr / 10);
  EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, 6, kTotal), kLr * 7 / 10);
  EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, 9, kTotal), kLr);
  EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, 10, kTotal), kLr);
  EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, 55, kTotal), (kLr + kMinLr) / 2);
  EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, 40, kTotal), Cosine(30.0 / 90.0));
  EXPECT_DOUBLE_EQ(ScheduledLr(s, kLr, 100, kTotal), kMinLr);
}

TEST(ScheduleTest, CosineWithZeroFloorEndsAtExactlyZero) {
  EXPECT_EQ(ScheduledLr(Spec("cosine", 5), kLr, 100, kTotal), 0.0);
}

TEST(ScheduleTest, StepsPastTheEndStayAtTheFloor) {
  EXPECT_EQ(ScheduledLr(Spec("linear", 0), kLr, 150, kTotal), 0.0);
  EXPECT_DOUBLE_EQ(ScheduledLr(Spec("cosine", 0, kMinLr), kLr, 150, kTotal),
                   kMinLr);
}

TEST(ScheduleTest, NoDecayPhaseHoldsBaseLr) {
  // Warm-up covers every step but the last: nothing to decay over.
  EXPECT_DOUBLE_EQ(ScheduledLr(Spec("linear", 10), kLr, 10, 11), kLr);
  EXPECT_DOUBLE_EQ(ScheduledLr(Spec("cosine", 0), kLr, 0, 1), kLr);
}

TEST(ScheduleTest, SetLrReachesEveryOptimizerType) {
  torch::Tensor w = torch::zeros({4, 3}, torch::requires_grad());
  for (const std::string type : {"sgd", "adam", "adamw", "adafactor", "adam8bit"}) {
    v1::OptimizerSpec spec;
    spec.set_type(type);
    spec.set_lr(0.5);
    auto opt = BuildOptimizer(spec, {w});
    EXPECT_DOUBLE_EQ(opt->param_groups()[0].options().get_lr(), 0.5) << type;
    SetLr(*opt, 0.25);
    EXPECT_DOUBLE_EQ(opt->param_groups()[0].options().get_lr(), 0.25) << type;
  }
}

}  // namespace
}  // namespace trainctl::train
