// The shared words as enums (common/vocabulary.h): each word parses to its
// value and back, an unknown word is kOther, and the spec accepts exactly
// the model types the table knows.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/spec.h"
#include "common/vocabulary.h"

namespace trainctl {
namespace {

TEST(VocabularyTest, EachWordParsesToItsValueAndBack) {
  for (Task task : {Task::kClassification, Task::kLanguageModel, Task::kRegression}) {
    v1::JobSpec spec;
    spec.set_task(TaskName(task));
    EXPECT_EQ(TaskOf(spec), task) << TaskName(task);
  }
  for (const std::string& word : ModelTypeNames()) {
    v1::ModelSpec model;
    model.set_type(word);
    EXPECT_NE(ModelTypeOf(model), ModelType::kOther) << word;
    EXPECT_EQ(ModelTypeName(ModelTypeOf(model)), word);
  }
  for (MetricKind kind : {MetricKind::kTrain, MetricKind::kEval, MetricKind::kPlan,
                          MetricKind::kFirstStep, MetricKind::kCheckpoint,
                          MetricKind::kStraggler}) {
    EXPECT_EQ(ParseMetricKind(MetricKindName(kind)), kind) << MetricKindName(kind);
  }
  for (RankPhase phase : {RankPhase::kStarting, RankPhase::kCompute, RankPhase::kAllReduce,
                          RankPhase::kOptimizer, RankPhase::kEvaluation, RankPhase::kCheckpoint,
                          RankPhase::kRegroup}) {
    EXPECT_EQ(ParseRankPhase(RankPhaseName(phase)), phase) << RankPhaseName(phase);
  }
}

// The words on the wire and in stored events: renaming one breaks older
// peers and every script that reads the JSON.
TEST(VocabularyTest, TheWordsAreTheOnesOnTheWire) {
  EXPECT_STREQ(TaskName(Task::kLanguageModel), "language_model");
  EXPECT_STREQ(ModelTypeName(ModelType::kTransformerClassifier), "transformer_classifier");
  EXPECT_STREQ(ModelTypeName(ModelType::kTorchScript), "torchscript");
  EXPECT_STREQ(MetricKindName(MetricKind::kFirstStep), "first_step");
  EXPECT_STREQ(RankPhaseName(RankPhase::kAllReduce), "all-reduce");
  EXPECT_EQ(static_cast<int>(RankPhase::kStarting), 0);
}

TEST(VocabularyTest, AnEmptyTaskIsClassificationAndUnknownWordsAreOther) {
  EXPECT_EQ(TaskOf(v1::JobSpec()), Task::kClassification);
  v1::JobSpec spec;
  spec.set_task("ranking");
  EXPECT_EQ(TaskOf(spec), Task::kOther);
  v1::ModelSpec model;
  model.set_type("resnet");
  EXPECT_EQ(ModelTypeOf(model), ModelType::kOther);
  EXPECT_EQ(ParseMetricKind("custom"), MetricKind::kOther);
  EXPECT_EQ(ParseRankPhase(""), RankPhase::kOther);
  EXPECT_STREQ(TaskName(Task::kOther), "other");
}

TEST(VocabularyTest, TheSpecAcceptsExactlyTheKnownModelTypes) {
  for (const std::string& word : ModelTypeNames()) {
    const std::string path = word == "torchscript" ? ", path: m.pt" : "";
    const std::string data = word == "gpt" ? "data: {format: text, train_path: t.txt}\n"
                                           : "data: {format: csv, train_path: t.csv}\n";
    absl::StatusOr<v1::JobSpec> spec =
        ParseJobSpec("name: n\nmodel: {type: " + word + path + "}\n" + data);
    ASSERT_TRUE(spec.ok()) << word << ": " << spec.status();
    EXPECT_EQ(ModelTypeName(ModelTypeOf(spec->model())), word);
  }
  absl::StatusOr<v1::JobSpec> unknown = ParseJobSpec("name: n\nmodel: resnet\n");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(std::string(unknown.status().message()),
              ::testing::HasSubstr("known: mlp, cnn, audio_cnn, transformer_classifier, gpt, "
                                   "torchscript"));
}

}  // namespace
}  // namespace trainctl
