// trainctl export's torch side: the safetensors layout (read back here
// byte by byte; tests/integration/export_test.cc has Python's safetensors
// read it), a checkpoint's model tensors read without a model, and a
// TorchScript module given a checkpoint's weights.

#include "worker/train/model_export.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <torch/script.h>
#include <unistd.h>

#include <cstring>

#include "common/atomic_file.h"
#include "tests/common/scoped_temp_dir.h"
#include "worker/train/models/model.h"
#include "worker/train/optim/optimizers.h"
#include "worker/train/train_state.h"

namespace trainctl::train {
namespace {

using ::testing::HasSubstr;
using trainctl::testing::ScopedTempDir;

uint64_t HeaderLength(const std::string& bytes) {
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), sizeof length);
  return length;
}

TEST(SafetensorsTest, HeaderNamesEachTensorsDtypeShapeAndByteRange) {
  const NamedTensors tensors = {
      {"fc0.weight", torch::zeros({2, 3})},
      {"steps", torch::zeros({4}, torch::kLong)},
      {"half", torch::zeros({1}, torch::kBFloat16)}};
  absl::StatusOr<std::string> header =
      SafetensorsHeader(tensors, {{"trainctl.job_id", "job-\"3\""}});
  ASSERT_TRUE(header.ok()) << header.status();
  const uint64_t length = HeaderLength(*header);
  EXPECT_EQ(header->size(), 8 + length);
  EXPECT_EQ(length % 8, 0u) << "the data must start 8-aligned";
  const std::string json = header->substr(8);
  EXPECT_EQ(json.find("{\"__metadata__\":{\"trainctl.job_id\":\"job-\\\"3\\\"\"},"), 0u)
      << json;
  EXPECT_THAT(json, HasSubstr("\"fc0.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],"
                              "\"data_offsets\":[0,24]}"));
  EXPECT_THAT(json, HasSubstr("\"steps\":{\"dtype\":\"I64\",\"shape\":[4],"
                              "\"data_offsets\":[24,56]}"));
  EXPECT_THAT(json, HasSubstr("\"half\":{\"dtype\":\"BF16\",\"shape\":[1],"
                              "\"data_offsets\":[56,58]}"));
  EXPECT_EQ(json.find_last_not_of(' '), json.rfind('}')) << "padded with spaces";
}

TEST(SafetensorsTest, RefusesWhatTheFormatCannotHold) {
  absl::StatusOr<std::string> header =
      SafetensorsHeader({{"z", torch::zeros({2}, torch::kComplexFloat)}}, {});
  ASSERT_FALSE(header.ok());
  EXPECT_THAT(std::string(header.status().message()), HasSubstr("tensor z has dtype"));
  header = SafetensorsHeader({{"a", torch::zeros({1})}, {"a", torch::zeros({1})}}, {});
  ASSERT_FALSE(header.ok());
  EXPECT_THAT(std::string(header.status().message()), HasSubstr("a is used twice"));
}

TEST(SafetensorsTest, FileHoldsTheValuesInOrderContiguous) {
  ScopedTempDir dir("export");
  const torch::Tensor matrix = torch::arange(6, torch::kFloat).view({2, 3});
  const NamedTensors tensors = {{"t", matrix.t()},  // not contiguous
                                {"ids", torch::tensor({7, 8}, torch::kLong)}};
  const std::string path = dir.path() + "/m.safetensors";
  ASSERT_TRUE(WriteSafetensors(tensors, {}, path).ok());
  absl::StatusOr<std::string> bytes = ReadWholeFile(path);
  ASSERT_TRUE(bytes.ok());
  const size_t data = 8 + HeaderLength(*bytes);
  ASSERT_EQ(bytes->size(), data + 6 * 4 + 2 * 8);
  float values[6];
  std::memcpy(values, bytes->data() + data, sizeof values);
  EXPECT_THAT(values, ::testing::ElementsAre(0, 3, 1, 4, 2, 5));  // the transpose's order
  int64_t ids[2];
  std::memcpy(ids, bytes->data() + data + 24, sizeof ids);
  EXPECT_THAT(ids, ::testing::ElementsAre(7, 8));
}

TEST(SafetensorsTest, AnUnwritablePlaceIsNamed) {
  ScopedTempDir dir("export");
  const std::string not_a_dir = dir.path() + "/file";
  ASSERT_TRUE(WriteFileAtomically(not_a_dir, "x").ok());
  const absl::Status written =
      WriteSafetensors({{"a", torch::zeros({1})}}, {}, not_a_dir + "/m.safetensors");
  ASSERT_FALSE(written.ok());
  EXPECT_THAT(std::string(written.message()), HasSubstr(not_a_dir));
}

// A small mlp and its optimizer, as a rank holds them.
struct Trained {
  std::unique_ptr<Model> model;
  std::vector<torch::Tensor> params;
  std::unique_ptr<torch::optim::Optimizer> optimizer;
};

Trained SmallMlp() {
  v1::JobSpec spec;
  spec.set_task("classification");
  spec.mutable_model()->set_type("mlp");
  spec.mutable_model()->add_hidden(5);
  spec.mutable_optimizer()->set_type("sgd");
  spec.mutable_optimizer()->set_lr(0.1);
  DataInfo info;
  info.input_shape = {4};
  info.num_classes = 3;
  Trained t;
  t.model = std::move(BuildModel(spec, info)).value();
  t.params = t.model->Parameters();
  t.optimizer = BuildOptimizer(spec.optimizer(), t.params);
  return t;
}

TEST(CheckpointModelTest, ReadsTheModelTensorsWithoutAModel) {
  torch::manual_seed(3);
  Trained t = SmallMlp();
  TrainingCursor cursor;
  cursor.step = 40;
  cursor.epoch = 2;
  absl::StatusOr<std::string> bytes = EncodeTrainingState(
      {t.model.get(), t.optimizer.get(), t.params, nullptr}, cursor);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  absl::StatusOr<CheckpointModel> read = DecodeCheckpointModel(*bytes);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->cursor.step, 40);
  EXPECT_EQ(read->cursor.epoch, 2);
  const auto state = t.model->NamedState();
  ASSERT_EQ(read->tensors.size(), state.size());
  for (size_t i = 0; i < state.size(); ++i) {
    EXPECT_EQ(read->tensors[i].first, state[i].first);
    EXPECT_TRUE(torch::equal(read->tensors[i].second, state[i].second)) << state[i].first;
  }
  absl::StatusOr<CheckpointModel> damaged = DecodeCheckpointModel("not a checkpoint");
  ASSERT_FALSE(damaged.ok());
  EXPECT_EQ(damaged.status().code(), absl::StatusCode::kDataLoss);
}

TEST(TorchScriptExportTest, TheModuleGetsTheCheckpointsWeightsAndOnlyItsOwn) {
  ScopedTempDir dir("export");
  torch::jit::Module module("Tiny");
  module.register_attribute("training", c10::BoolType::get(), true);  // as scripted
  module.register_parameter("w", torch::zeros({2, 2}), /*is_buffer=*/false);
  module.register_buffer("count", torch::zeros({1}, torch::kLong));
  module.define("def forward(self, x):\n  return x.mm(self.w)\n");
  const std::string original = dir.path() + "/tiny.pt";
  module.save(original);

  const torch::Tensor trained = torch::tensor({{1.0f, 2.0f}, {3.0f, 4.0f}});
  const std::string out = dir.path() + "/tuned.pt";
  ASSERT_TRUE(SaveTorchScriptWithState(
                  original, {{"w", trained}, {"count", torch::tensor({5}, torch::kLong)}}, out)
                  .ok());
  torch::jit::Module tuned = torch::jit::load(out);
  EXPECT_FALSE(tuned.is_training());
  const torch::Tensor y =
      tuned.forward({torch::eye(2)}).toTensor();
  EXPECT_TRUE(torch::equal(y, trained));

  absl::Status other = SaveTorchScriptWithState(
      original, {{"w", torch::zeros({3, 3})}, {"count", torch::zeros({1})}},
      dir.path() + "/other.pt");
  ASSERT_FALSE(other.ok());
  EXPECT_THAT(std::string(other.message()), HasSubstr("tensor w [3, 3] has another shape"));
  EXPECT_NE(::access((dir.path() + "/other.pt").c_str(), F_OK), 0);
  absl::Status missing = SaveTorchScriptWithState(dir.path() + "/none.pt", {}, out);
  EXPECT_THAT(std::string(missing.message()), HasSubstr("model.path: cannot load"));
}

}  // namespace
}  // namespace trainctl::train
