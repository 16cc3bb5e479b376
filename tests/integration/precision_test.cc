// Mixed precision: bf16 autocast with fp32 master weights must train as
// well as fp32 (final Fashion-MNIST accuracy within 1 point).

#include <gtest/gtest.h>

#include "common/spec.h"
#include "worker/train/trainer.h"

namespace trainctl::train {
namespace {

constexpr char kData[] = "/usr/share/datasets/fashion-mnist/";

TrainResult TrainWith(const std::string& precision) {
  const std::string text =
      std::string("seed: 7\nmodel: {type: mlp, hidden: [256, 128]}\n"
                  "data:\n  train_images: ") + kData +
      "train-images-idx3-ubyte.gz\n  train_labels: " + kData +
      "train-labels-idx1-ubyte.gz\n  eval_images: " + kData +
      "t10k-images-idx3-ubyte.gz\n  eval_labels: " + kData +
      "t10k-labels-idx1-ubyte.gz\n  train_limit: 20000\n  eval_limit: 5000\n"
      "optimizer: {type: adamw, lr: 0.002}\n"
      "scheduler: {type: linear, warmup_steps: 20}\n"
      "training: {batch_size: 64, epochs: 1, precision: " + precision + "}\n";
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(text);
  EXPECT_TRUE(spec.ok()) << spec.status();
  RankContext ctx;
  absl::StatusOr<TrainResult> result = Train(*spec, ctx);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : TrainResult{};
}

TEST(PrecisionTest, Bf16AccuracyWithinOnePointOfFp32) {
  at::set_num_threads(1);
  TrainResult fp32 = TrainWith("fp32");
  TrainResult bf16 = TrainWith("bf16");
  ASSERT_TRUE(fp32.eval.count("eval_accuracy"));
  ASSERT_TRUE(bf16.eval.count("eval_accuracy"));
  const double a32 = fp32.eval.at("eval_accuracy");
  const double a16 = bf16.eval.at("eval_accuracy");
  std::cout << "eval accuracy fp32 " << a32 << ", bf16 " << a16 << std::endl;
  EXPECT_GT(a32, 0.8);
  EXPECT_NEAR(a16, a32, 0.01);
  // The master weights stay fp32 under autocast.
  for (const auto& p : bf16.parameters) EXPECT_EQ(p.scalar_type(), torch::kFloat32);
}

TEST(PrecisionTest, Fp16WithoutCudaIsAClearError) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(
      std::string("model: mlp\ndata: {train_images: ") + kData +
      "train-images-idx3-ubyte.gz, train_labels: " + kData +
      "train-labels-idx1-ubyte.gz}\ntraining: {precision: fp16}\n");
  ASSERT_TRUE(spec.ok());
  absl::StatusOr<TrainResult> result = Train(*spec, RankContext{});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().message(),
            "training.precision: fp16 needs a CUDA device; use bf16 on CPU");
}

}  // namespace
}  // namespace trainctl::train
