// data.tokenizer and data.text_column: where they apply, and what a spec
// that names them trains.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/memory_plan.h"
#include "common/shipped_files.h"
#include "common/spec.h"

namespace trainctl {
namespace {

using ::testing::HasSubstr;

std::string Error(const std::string& yaml) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(yaml);
  EXPECT_FALSE(spec.ok()) << yaml;
  return std::string(spec.status().message());
}

TEST(SpecTextTest, ACsvTextColumnTrainsAClassifierOnTokenIds) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(
      "model: transformer_classifier\n"
      "data: {format: csv, header: true, train_path: /d/r.csv, text_column: review,\n"
      "       tokenizer: /d/spm.model, seq_len: 64}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->task(), "classification");
  EXPECT_EQ(spec->data().text_column(), "review");
  EXPECT_EQ(spec->data().tokenizer(), "/d/spm.model");
  // The plan's sample is seq_len ids; the vocabulary is the probe's (the
  // tokenizer's pieces), or bytes without a tokenizer.
  PlanData data;
  data.vocab_size = 1000;
  EXPECT_EQ(ResolvePlanData(*spec, data).input_shape, std::vector<int64_t>{64});
  EXPECT_EQ(ResolvePlanData(*spec, data).vocab_size, 1000);
  spec->mutable_data()->clear_tokenizer();
  EXPECT_EQ(ResolvePlanData(*spec, {}).vocab_size, 256);
  // A relative model file is uploaded with the job like the data files.
  v1::JobSpec relative = *spec;
  relative.mutable_data()->set_tokenizer("spm.model");
  const std::vector<std::string> unshipped = UnshippedRelativePaths(relative);
  ASSERT_EQ(unshipped.size(), 1u);
  EXPECT_THAT(unshipped[0], HasSubstr("data.tokenizer"));
}

TEST(SpecTextTest, TokenizerAndTextColumnApplyOnlyWhereThereIsText) {
  EXPECT_THAT(Error("model: mlp\ndata: {format: idx, train_images: /a, train_labels: /b, "
                    "tokenizer: /m}\n"),
              HasSubstr("data.tokenizer: applies to data.format text and csv (with "
                        "text_column); format idx holds no text"));
  EXPECT_THAT(Error("model: transformer_classifier\n"
                    "data: {format: csv, train_path: /a.csv, tokenizer: /m}\n"),
              HasSubstr("data.tokenizer: with format csv needs data.text_column"));
  EXPECT_THAT(Error("model: gpt\ndata: {format: text, train_path: /a, text_column: t}\n"),
              HasSubstr("data.text_column: applies to data.format csv"));
  EXPECT_THAT(Error("model: transformer_classifier\n"
                    "data: {format: csv, train_path: /a.csv, text_column: t, label_column: t}\n"),
              HasSubstr("data.text_column: is also data.label_column"));
  EXPECT_THAT(Error("model: mlp\ndata: {format: csv, train_path: /a.csv, text_column: t}\n"),
              HasSubstr("model.type: mlp takes features; data.text_column gives token ids"));
  EXPECT_THAT(Error("task: language_model\nmodel: gpt\n"
                    "data: {format: csv, train_path: /a.csv, text_column: t}\n"),
              HasSubstr("data.text_column: gives one target per row"));
  // Text under a tokenizer is still a language model's.
  absl::StatusOr<v1::JobSpec> gpt =
      ParseJobSpec("model: gpt\ndata: {format: text, train_path: /a.txt, tokenizer: /m}\n");
  ASSERT_TRUE(gpt.ok()) << gpt.status();
  EXPECT_EQ(gpt->task(), "language_model");
  EXPECT_EQ(ResolvePlanData(*gpt, {}).vocab_size, 0);  // the tokenizer's, from the probe
}

}  // namespace
}  // namespace trainctl
