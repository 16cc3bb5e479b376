#include "coordinator/checkpoint_retention.h"

#include <gtest/gtest.h>

namespace trainctl::coordinator {
namespace {

v1::Checkpoint At(int64_t step, std::map<std::string, double> metrics = {}) {
  v1::Checkpoint c;
  c.set_step(step);
  for (const auto& [k, v] : metrics) (*c.mutable_metrics())[k] = v;
  return c;
}

v1::CheckpointSpec Rule(int keep_last, const std::string& best = "",
                        const std::string& mode = "max") {
  v1::CheckpointSpec spec;
  spec.set_keep_last(keep_last);
  spec.set_keep_best_by(best);
  spec.set_keep_best_mode(mode);
  return spec;
}

TEST(CheckpointRetentionTest, KeepLastZeroKeepsEverything) {
  EXPECT_TRUE(CheckpointsToPrune({At(1), At(2), At(3)}, Rule(0)).empty());
}

TEST(CheckpointRetentionTest, KeepsTheNewestNInAnyInputOrder) {
  EXPECT_EQ(CheckpointsToPrune({At(30), At(10), At(40), At(20)}, Rule(2)),
            (std::vector<int64_t>{10, 20}));
}

TEST(CheckpointRetentionTest, KeepsTheBestByMaxOrMin) {
  const std::vector<v1::Checkpoint> catalog = {
      At(10, {{"accuracy", 0.7}, {"loss", 0.9}}),
      At(20, {{"accuracy", 0.9}, {"loss", 0.5}}),
      At(30, {{"accuracy", 0.8}, {"loss", 0.4}}),
      At(40)};
  EXPECT_EQ(CheckpointsToPrune(catalog, Rule(1, "eval_accuracy", "max")),
            (std::vector<int64_t>{10, 30}));
  EXPECT_EQ(CheckpointsToPrune(catalog, Rule(1, "loss", "min")),
            (std::vector<int64_t>{10, 20}));
}

TEST(CheckpointRetentionTest, TiesGoToTheLaterCheckpoint) {
  EXPECT_EQ(CheckpointsToPrune({At(10, {{"accuracy", 0.9}}),
                                At(20, {{"accuracy", 0.9}}), At(30)},
                               Rule(1, "accuracy")),
            (std::vector<int64_t>{10}));
}

TEST(CheckpointRetentionTest, AMetricNoCheckpointHasKeepsOnlyTheNewest) {
  EXPECT_EQ(CheckpointsToPrune({At(10), At(20)}, Rule(1, "f1")),
            (std::vector<int64_t>{10}));
  EXPECT_FALSE(BestByValue(At(10, {{"accuracy", 1}}), Rule(1, "f1")));
  EXPECT_EQ(*BestByValue(At(10, {{"accuracy", 1}}), Rule(1, "eval_accuracy")),
            1.0);
}

}  // namespace
}  // namespace trainctl::coordinator
