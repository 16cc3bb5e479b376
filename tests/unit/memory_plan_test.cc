// The dry run's memory plan (common/memory_plan.h) against what the ranks
// really build: the parameter count of each built-in model, and the bytes
// of each optimizer's state after a step, must be the plan's to the byte.
// The activation estimate is checked for what it promises: that gradient
// checkpointing lowers it, and that it grows with the batch.

#include "common/memory_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/spec.h"
#include "model_fixtures.h"
#include "worker/train/models/model.h"
#include "worker/train/optim/optimizers.h"

namespace trainctl::train {
namespace {

using ::testing::HasSubstr;

struct Case {
  std::string name, spec;
  DataInfo data;
};

std::vector<Case> Models() {
  const std::string idx = "data: {train_images: /a, train_labels: /b}\n";
  return {
      {"mlp", "model: {type: mlp, hidden: [128, 64]}\n" + idx, Images({1, 28, 28})},
      {"cnn", "model: {type: cnn, channels: [8, 16], hidden: [32]}\n" + idx,
       Images({3, 32, 32})},
      {"transformer_classifier",
       "model: {type: transformer_classifier, d_model: 32, n_layers: 2, max_seq_len: 16}\n"
       "data: {format: csv, train_path: /a}\n",
       Tokens(16, 300)},
      {"gpt",
       "model: {type: gpt, d_model: 64, n_layers: 3, n_heads: 4, max_seq_len: 32}\n"
       "data: {format: text, train_path: /a, seq_len: 32}\n",
       Tokens(32, 256)},
      {"audio_cnn",
       "model: {type: audio_cnn, channels: [8, 16], hidden: [32]}\n"
       "data: {format: audio, train_path: /a.csv}\n",
       Images({1, 40, 101})},
  };
}

PlanData AsPlanData(const DataInfo& info) {
  PlanData data;
  data.input_shape = info.input_shape;
  data.num_classes = info.num_classes;
  data.vocab_size = info.vocab_size;
  return data;
}

TEST(MemoryPlanTest, ParametersAndOptimizerStateAreThoseOfTheRanks) {
  const std::vector<std::string> optimizers = {
      "{type: adamw}", "{type: adam}", "{type: sgd}", "{type: sgd, momentum: 0.9}",
      "{type: adafactor}", "{type: adafactor, betas: [0.9, 0.999]}",
      "{type: adam8bit, block_size: 256}"};
  for (const Case& c : Models()) {
    for (const std::string& optimizer : optimizers) {
      SCOPED_TRACE(c.name + " " + optimizer);
      const v1::JobSpec spec = Spec(c.spec + "optimizer: " + optimizer + "\n");
      absl::StatusOr<std::unique_ptr<Model>> model = BuildModel(spec, c.data);
      ASSERT_TRUE(model.ok()) << model.status();
      std::vector<torch::Tensor> params = (*model)->Parameters();
      int64_t numel = 0;
      for (const torch::Tensor& p : params) numel += p.numel();
      const v1::MemoryPlan plan = PlanRankMemory(spec, AsPlanData(c.data), 8);
      ASSERT_EQ(plan.note(), "");
      EXPECT_EQ(plan.parameters(), numel);
      EXPECT_EQ(plan.parameter_bytes(), 4 * numel);
      EXPECT_EQ(plan.gradient_bytes(), 4 * numel);
      auto opt = BuildOptimizer(spec.optimizer(), params);
      for (torch::Tensor& p : params) p.mutable_grad() = torch::randn_like(p);
      opt->step();
      EXPECT_EQ(plan.optimizer_bytes(), OptimizerStateBytes(*opt));
      EXPECT_EQ(plan.total_bytes(), plan.parameter_bytes() + plan.gradient_bytes() +
                                        plan.optimizer_bytes() + plan.activation_bytes());
    }
  }
}

TEST(MemoryPlanTest, ActivationsFollowBatchAndCheckpointing) {
  for (const Case& c : Models()) {
    SCOPED_TRACE(c.name);
    const v1::JobSpec spec = Spec(c.spec);
    const v1::MemoryPlan small = PlanRankMemory(spec, AsPlanData(c.data), 4);
    const v1::MemoryPlan large = PlanRankMemory(spec, AsPlanData(c.data), 8);
    EXPECT_GT(small.activation_bytes(), 0);
    EXPECT_EQ(large.activation_bytes(), 2 * small.activation_bytes());
    EXPECT_EQ(small.activation_bytes(), small.activation_bytes_plain());
    if (c.name == "cnn" || c.name == "audio_cnn") {  // no checkpointed blocks
      EXPECT_EQ(small.activation_bytes_checkpointed(), small.activation_bytes_plain());
    } else {
      EXPECT_LT(small.activation_bytes_checkpointed(), small.activation_bytes_plain());
    }
  }
  // bf16 autocast keeps half-size activations; the checkpointing flag
  // picks which estimate counts.
  const v1::JobSpec gpt = Spec(Models()[3].spec +
                               "training: {precision: bf16, gradient_checkpointing: true}\n");
  const v1::MemoryPlan fp32 = PlanRankMemory(Spec(Models()[3].spec), AsPlanData(Models()[3].data), 4);
  const v1::MemoryPlan bf16 = PlanRankMemory(gpt, AsPlanData(Models()[3].data), 4);
  EXPECT_EQ(2 * bf16.activation_bytes_plain(), fp32.activation_bytes_plain());
  EXPECT_EQ(bf16.activation_bytes(), bf16.activation_bytes_checkpointed());
}

TEST(MemoryPlanTest, WhatTheDataDecidesIsNamedWhenUnknown) {
  const std::string idx = "data: {train_images: /a, train_labels: /b}\n";
  v1::MemoryPlan plan = PlanRankMemory(Spec("model: mlp\n" + idx), PlanData{}, 8);
  EXPECT_EQ(plan.parameters(), 0);
  EXPECT_THAT(plan.note(), HasSubstr("the input size comes from the data"));
  PlanData shape;
  shape.input_shape = {28, 28};
  plan = PlanRankMemory(Spec("model: mlp\n" + idx), shape, 8);
  EXPECT_THAT(plan.note(), HasSubstr("set model.num_classes to plan it"));
  // The spec's own size is enough.
  plan = PlanRankMemory(Spec("model: {type: mlp, num_classes: 10}\n" + idx), shape, 8);
  EXPECT_EQ(plan.parameters(), (784 * 512 + 512) + (512 * 256 + 256) + (256 * 10 + 10));
  plan = PlanRankMemory(Spec("model: {type: torchscript, path: /m.pt}\n" + idx), shape, 8);
  EXPECT_THAT(plan.note(), HasSubstr("counted when the ranks load it"));
  // Text is bytes: a GPT on it is planned from the spec alone.
  plan = PlanRankMemory(Spec(Models()[3].spec), PlanData{}, 8);
  EXPECT_GT(plan.parameters(), 0);
  // A spectrogram's shape is the spec's: the data need only give classes.
  PlanData classes;
  classes.num_classes = 8;
  plan = PlanRankMemory(Spec("model: {type: audio_cnn, channels: [8, 16], hidden: [32]}\n"
                             "data: {format: audio, train_path: /a.csv, audio: {n_mels: 40}}\n"),
                        classes, 8);
  EXPECT_EQ(plan.note(), "");
  EXPECT_EQ(plan.parameters(), (8 * 9 + 8) + (16 * 8 * 9 + 16) + (16 * 10 * 32 + 32) + (32 * 8 + 8));
  // A random crop sizes the cnn's dense layer as the ranks see it.
  const std::string crop =
      "model: {type: cnn, num_classes: 10}\ndata: {train_images: /a, train_labels: /b,"
      " transforms: {random_crop: {size: [24, 24]}}}\n";
  PlanData images;
  images.input_shape = {28, 28};
  const v1::MemoryPlan cropped = PlanRankMemory(Spec(crop), images, 8);
  PlanData small_images;
  small_images.input_shape = {24, 24};
  const v1::MemoryPlan direct = PlanRankMemory(
      Spec("model: {type: cnn, num_classes: 10}\n" + idx), small_images, 8);
  EXPECT_EQ(cropped.parameters(), direct.parameters());
}

TEST(MemoryPlanTest, BytesReadAsPeopleWriteThem) {
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1536), "1.5 KiB");
  EXPECT_EQ(FormatBytes(int64_t{300} << 20), "300 MiB");
  EXPECT_EQ(FormatBytes(int64_t{5} << 30), "5 GiB");
  EXPECT_EQ(FormatBytes((int64_t{5} << 30) + (int64_t{300} << 20)), "5.3 GiB");
}

}  // namespace
}  // namespace trainctl::train
