// data.train_inputs, eval_inputs and input_name: an npy job's further named
// model inputs, as YAML maps or the lists `status -o json` prints, and
// their rules; each named input is a file field that may be shipped.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/shipped_files.h"
#include "common/spec.h"

namespace trainctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

const std::string kModel = "model: {type: torchscript, path: /m/bert.pt}\n";

absl::StatusOr<v1::JobSpec> Parse(const std::string& data) {
  return ParseJobSpec(kModel + "data: {format: npy, train_path: /d/ids.npy, "
                               "train_labels: /d/y.npy" + data + "}\n");
}

TEST(SpecInputsTest, AMapOrAListNamesEachInputsFile) {
  absl::StatusOr<v1::JobSpec> map = Parse(
      ", train_inputs: {attention_mask: /d/mask.npy, token_type_ids: /d/types.npy}"
      ", eval_path: /d/eval_ids.npy, eval_labels: /d/eval_y.npy"
      ", eval_inputs: {token_type_ids: /d/eval_types.npy, attention_mask: /d/eval_mask.npy}");
  ASSERT_TRUE(map.ok()) << map.status();
  const v1::DataSpec& d = map->data();
  EXPECT_EQ(d.input_name(), "input_ids");
  ASSERT_EQ(d.train_inputs_size(), 2);
  EXPECT_EQ(d.train_inputs(0).name(), "attention_mask");  // in the spec's order
  EXPECT_EQ(d.train_inputs(0).path(), "/d/mask.npy");
  EXPECT_EQ(d.train_inputs(1).name(), "token_type_ids");
  EXPECT_EQ(d.eval_inputs(1).path(), "/d/eval_mask.npy");

  absl::StatusOr<v1::JobSpec> list = Parse(
      ", input_name: pixel_values"
      ", train_inputs: [{name: attention_mask, path: /d/mask.npy}]");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(list->data().input_name(), "pixel_values");
  ASSERT_EQ(list->data().train_inputs_size(), 1);
  EXPECT_EQ(list->data().train_inputs(0).path(), "/d/mask.npy");

  absl::StatusOr<v1::JobSpec> none = Parse("");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->data().input_name(), "");
}

TEST(SpecInputsTest, TheirRulesNameTheField) {
  struct Case {
    std::string spec, error;
  };
  for (const Case& c : std::vector<Case>{
           {kModel + "data: {format: tensors, train_path: /d/t.pt, "
                     "train_inputs: {attention_mask: /d/m.npy}}",
            "data.train_inputs: only for format npy (data.format is tensors; a "
            "tensors file names its inputs in a dict x)"},
           {kModel + "task: language_model\ndata: {format: npy, train_path: /d/ids.npy, "
                     "train_inputs: {attention_mask: /d/m.npy}}",
            "data.train_inputs: task language_model reads one token stream"},
           {kModel + "data: {format: npy, train_path: /d/ids.npy, train_labels: /d/y.npy, "
                     "train_inputs: {2mask: /d/m.npy}}",
            "data.train_inputs: input 1's name must be a Python identifier"},
           {kModel + "data: {format: npy, train_path: /d/ids.npy, train_labels: /d/y.npy, "
                     "train_inputs: {input_ids: /d/m.npy}}",
            "data.train_inputs.input_ids: is train_path's input (data.input_name)"},
           {kModel + "data: {format: npy, train_path: /d/ids.npy, train_labels: /d/y.npy, "
                     "train_inputs: {attention_mask: {path: /d/m.npy}}}",
            "data.train_inputs.attention_mask: must be a string"},
           {kModel + "data: {format: npy, train_path: /d/ids.npy, train_labels: /d/y.npy, "
                     "train_inputs: {attention_mask: ~}}",
            "data.train_inputs.attention_mask: must be a path"},
           {kModel + "data: {format: npy, train_path: /d/ids.npy, train_labels: /d/y.npy, "
                     "train_inputs: {attention_mask: /d/m.npy}, eval_path: /d/e.npy, "
                     "eval_labels: /d/ey.npy}",
            "data.eval_inputs: must name the inputs data.train_inputs names "
            "(attention_mask) for the eval set of data.eval_path"},
           {kModel + "data: {format: npy, train_path: /d/ids.npy, train_labels: /d/y.npy, "
                     "train_inputs: {attention_mask: /d/m.npy}, "
                     "eval_inputs: {attention_mask: /d/em.npy}}",
            "data.eval_inputs: given without data.eval_path"},
           {kModel + "data: {format: npy, train_path: /d/ids.npy, train_labels: /d/y.npy, "
                     "input_name: ids}",
            "data.input_name: names train_path's input only beside data.train_inputs"},
       }) {
    absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(c.spec);
    ASSERT_FALSE(spec.ok()) << c.spec;
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr(c.error)) << c.spec;
  }
}

// The map form reads its paths as the list form does: `--dry-run` prints the
// list form, and a spec it accepted must parse back from that JSON.
TEST(SpecInputsTest, TheMapFormRefusesWhatTheListFormRefuses) {
  for (const auto& [inputs, error] : std::vector<std::pair<std::string, std::string>>{
           {"{attention_mask: \"/d/m\\x01.npy\"}",
            "data.train_inputs.attention_mask: must not contain control characters"},
           {"[{name: attention_mask, path: \"/d/m\\x01.npy\"}]",
            "data.train_inputs[0].path: must not contain control characters"}}) {
    absl::StatusOr<v1::JobSpec> spec = Parse(", train_inputs: " + inputs);
    ASSERT_FALSE(spec.ok()) << inputs;
    const std::string message(spec.status().message());
    EXPECT_THAT(message, HasSubstr(error)) << inputs;
    EXPECT_THAT(message, Not(HasSubstr("is required"))) << inputs;
  }
  absl::StatusOr<v1::JobSpec> spec =
      Parse(", train_inputs: {attention_mask: /d/m.npy}");
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<v1::JobSpec> again = ParseJobSpec(JobSpecToJson(*spec));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->SerializeAsString(), spec->SerializeAsString());
}

// A name that is no identifier is refused by its position: it may hold
// control characters that would act on the reader's terminal.
TEST(SpecInputsTest, ABadNameIsNotQuoted) {
  absl::StatusOr<v1::JobSpec> spec =
      Parse(", train_inputs: {attention_mask: /d/m.npy, \"\\e[31mred\": /d/r.npy}");
  ASSERT_FALSE(spec.ok());
  const std::string message(spec.status().message());
  EXPECT_THAT(message, HasSubstr("data.train_inputs: input 2's name must be a Python identifier"));
  EXPECT_EQ(message.find('\x1b'), std::string::npos) << message;
}

TEST(SpecInputsTest, ANamedInputIsAFileFieldThatMayBeShipped) {
  const std::string data =
      "data: {format: npy, train_path: /d/ids.npy, train_labels: /d/y.npy, "
      "train_inputs: {attention_mask: mask.npy}}\n";
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(kModel + data);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const std::vector<std::string> problems = UnshippedRelativePaths(*spec);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0],
              HasSubstr("data.train_inputs.attention_mask: 'mask.npy' is a relative path"));

  const std::string sha(64, 'a');
  spec = ParseJobSpec(kModel + data +
                      "shipped_files: [{field: data.train_inputs.attention_mask, "
                      "path: mask.npy, sha256: " + sha + ", size: 10}]\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_TRUE(UnshippedRelativePaths(*spec).empty());
  // A rank points the field at its fetched copy.
  *MutableSpecFilePath(&*spec, "data.train_inputs.attention_mask") = "/cache/abc";
  EXPECT_EQ(spec->data().train_inputs(0).path(), "/cache/abc");
  EXPECT_EQ(MutableSpecFilePath(&*spec, "data.train_inputs.token_type_ids"), nullptr);
}

}  // namespace
}  // namespace trainctl
