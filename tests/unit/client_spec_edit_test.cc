// `submit --set` / `--name`: edits land where the path says, with the type
// the spec reader gives the field, and bad edits are named.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/spec_edit.h"
#include "common/spec.h"

namespace trainctl::client {
namespace {

using ::testing::HasSubstr;

constexpr char kSpec[] =
    "name: base\nranks: 2\nmodel: {type: mlp, hidden: [256, 128]}\n"
    "data: {train_images: a, train_labels: b}\n"
    "optimizer:\n  type: adamw\n  lr: 0.001\n"
    "training: {batch_size: 64, epochs: 3}\n";

v1::JobSpec Parsed(const std::string& text) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(text);
  EXPECT_TRUE(spec.ok()) << spec.status() << "\n" << text;
  return spec.ok() ? *spec : v1::JobSpec();
}

std::string Edited(const std::vector<std::string>& sets,
                   const std::string& name = "") {
  absl::StatusOr<std::string> text = ApplySpecEdits(kSpec, {sets, name});
  EXPECT_TRUE(text.ok()) << text.status();
  return text.ok() ? *text : "";
}

std::string EditError(const std::string& spec,
                      const std::vector<std::string>& sets) {
  absl::StatusOr<std::string> text = ApplySpecEdits(spec, {sets, ""});
  EXPECT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(text.status().message());
}

TEST(SpecEditTest, NoEditsLeaveTheTextAsItIs) {
  EXPECT_EQ(*ApplySpecEdits(kSpec, {}), kSpec);
}

TEST(SpecEditTest, SetsExistingAndNewFieldsWithTheirTypes) {
  const v1::JobSpec spec = Parsed(Edited(
      {"training.epochs=1", "optimizer.lr=0.01", "optimizer.type=sgd",
       "checkpoint.dir=/tmp/ckpt", "training.max_steps=7", "ranks=4"}));
  EXPECT_EQ(spec.training().epochs(), 1);
  EXPECT_DOUBLE_EQ(spec.optimizer().lr(), 0.01);
  EXPECT_EQ(spec.optimizer().type(), "sgd");
  EXPECT_EQ(spec.checkpoint().dir(), "/tmp/ckpt");  // a new mapping
  EXPECT_EQ(spec.training().max_steps(), 7);
  EXPECT_EQ(spec.ranks(), 4);
  EXPECT_EQ(spec.training().batch_size(), 64);  // untouched
}

TEST(SpecEditTest, ListsAsValuesAndIndexes) {
  EXPECT_THAT(Parsed(Edited({"model.hidden=[64, 32, 16]"})).model().hidden(),
              testing::ElementsAre(64, 32, 16));
  EXPECT_THAT(Parsed(Edited({"model.hidden.1=99"})).model().hidden(),
              testing::ElementsAre(256, 99));
  EXPECT_THAT(EditError(kSpec, {"model.hidden.5=1"}),
              HasSubstr("model.hidden is a list of 2 items; '5' is not an index"));
}

TEST(SpecEditTest, LaterEditsWinAndNameIsAlwaysAString) {
  const v1::JobSpec spec =
      Parsed(Edited({"training.epochs=5", "training.epochs=2"}, "007"));
  EXPECT_EQ(spec.training().epochs(), 2);
  EXPECT_EQ(spec.name(), "007");
}

TEST(SpecEditTest, JsonSpecsAreEditedToo) {
  const std::string json =
      R"({"name": "j", "ranks": 1, "model": {"type": "mlp"},)"
      R"( "data": {"train_images": "a", "train_labels": "b"}})";
  absl::StatusOr<std::string> text =
      ApplySpecEdits(json, {{"training.batch_size=32"}, "renamed"});
  ASSERT_TRUE(text.ok()) << text.status();
  const v1::JobSpec spec = Parsed(*text);
  EXPECT_EQ(spec.training().batch_size(), 32);
  EXPECT_EQ(spec.name(), "renamed");
}

TEST(SpecEditTest, AnUnknownFieldIsLeftForTheValidatorToName) {
  absl::StatusOr<v1::JobSpec> spec =
      ParseJobSpec(Edited({"training.epochz=3"}));
  ASSERT_FALSE(spec.ok());
  EXPECT_THAT(std::string(spec.status().message()),
              HasSubstr("training.epochz"));
}

TEST(SpecEditTest, BadEditsAreNamed) {
  EXPECT_THAT(EditError(kSpec, {"training.epochs"}),
              HasSubstr("--set 'training.epochs': expected KEY.PATH=VALUE"));
  EXPECT_THAT(EditError(kSpec, {"training..epochs=1"}),
              HasSubstr("has an empty key"));
  EXPECT_THAT(EditError(kSpec, {"ranks.x=1"}),
              HasSubstr("cannot set a key inside ranks: it is a scalar"));
  EXPECT_THAT(EditError(kSpec, {"model.type=[unclosed"}),
              HasSubstr("--set 'model.type=[unclosed': the value is not valid YAML"));
  EXPECT_THAT(EditError("- a\n- b\n", {"x=1"}), HasSubstr("must be a mapping"));
  // The coordinator refuses duplicate keys; an edit must not hide them.
  EXPECT_THAT(EditError("ranks: 1\nranks: 2\n", {"x=1"}), HasSubstr("ranks"));
}

}  // namespace
}  // namespace trainctl::client
