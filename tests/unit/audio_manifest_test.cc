// Audio manifests (common/audio_manifest.h): RFC 4180 records, the header's
// columns found by name, and errors that name the line but never quote the
// file.

#include "common/audio_manifest.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace trainctl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

v1::AudioSpec Columns(const std::string& path = "path", const std::string& label = "label") {
  v1::AudioSpec audio;
  audio.set_path_column(path);
  audio.set_label_column(label);
  return audio;
}

TEST(CsvRecordTest, QuotedFieldsHoldDelimitersAndQuotes) {
  EXPECT_THAT(*SplitCsvRecord("a,b,,c"), ElementsAre("a", "b", "", "c"));
  EXPECT_THAT(*SplitCsvRecord("\"a, b\",\"say \"\"hi\"\"\",\"\""),
              ElementsAre("a, b", "say \"hi\"", ""));
  EXPECT_THAT(*SplitCsvRecord("x;\"y;z\"", ';'), ElementsAre("x", "y;z"));
  EXPECT_THAT(*SplitCsvRecord(""), ElementsAre(""));
  EXPECT_THAT(*SplitCsvRecord("a,"), ElementsAre("a", ""));
}

TEST(CsvRecordTest, MalformedQuotingIsRefused) {
  EXPECT_THAT(std::string(SplitCsvRecord("\"open").status().message()),
              HasSubstr("a quoted field is not closed"));
  EXPECT_THAT(std::string(SplitCsvRecord("\"a\"b,c").status().message()),
              HasSubstr("text follows a quoted field's closing quote"));
  EXPECT_THAT(std::string(SplitCsvRecord("a\"b").status().message()),
              HasSubstr("a quote inside an unquoted field"));
}

TEST(AudioManifestTest, ColumnsAreFoundByNameInAnyOrder) {
  const std::string text =
      "\xEF\xBB\xBF" "speaker, label ,path\r\n"
      "anna,3,wav/yes one.wav\r\n"
      "\r\n"
      "bob,0,\"/abs/no, again.flac\"\r\n";
  absl::StatusOr<std::vector<AudioManifestRow>> rows =
      ParseAudioManifest(text, Columns(), "data.train_path", "train.csv");
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[0].path, "wav/yes one.wav");
  EXPECT_EQ((*rows)[0].label, "3");
  EXPECT_EQ((*rows)[0].line, 2);
  EXPECT_EQ((*rows)[1].path, "/abs/no, again.flac");
  EXPECT_EQ((*rows)[1].line, 4);

  rows = ParseAudioManifest("file,word\na.wav,1\nb.wav,2\nc.wav,0\n", Columns("file", "word"),
                            "data.train_path", "train.csv", /*limit=*/2);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[1].path, "b.wav");
}

TEST(AudioManifestTest, ErrorsNameTheLineNotTheContents) {
  struct Case {
    std::string text, error;
  };
  for (const Case& c : std::vector<Case>{
           {"", "data.eval_path: e.csv: has no header row"},
           {"path,label\n", "data.eval_path: e.csv: lists no sound files"},
           {"path,klass\nsecret.wav,1\n",
            "data.eval_path: e.csv: line 1: the header row names no column label "
            "(data.audio.label_column)"},
           {"path,label\nsecret.wav,1\nsecret2.wav,1,extra\n",
            "data.eval_path: e.csv: line 3: has 3 fields but the header row has 2"},
           {"path,label\nsecret.wav,  \n", "data.eval_path: e.csv: line 2: the label is empty"},
           {"path,label\n,1\n", "line 2: the path is empty"},
           {"path,label\n\"secret.wav,1\n", "line 2: a quoted field is not closed"},
       }) {
    absl::StatusOr<std::vector<AudioManifestRow>> rows =
        ParseAudioManifest(c.text, Columns(), "data.eval_path", "e.csv");
    ASSERT_FALSE(rows.ok()) << c.text;
    EXPECT_EQ(rows.status().code(), absl::StatusCode::kInvalidArgument);
    const std::string message(rows.status().message());
    EXPECT_THAT(message, HasSubstr(c.error)) << c.text;
    EXPECT_THAT(message, Not(HasSubstr("secret"))) << c.text;
    EXPECT_THAT(message, Not(HasSubstr("cat"))) << c.text;
  }
}

std::vector<AudioManifestRow> Labels(const std::vector<std::string>& labels) {
  std::vector<AudioManifestRow> rows;
  for (const std::string& label : labels) {
    rows.push_back({"secret.wav", label, static_cast<int64_t>(rows.size()) + 2});
  }
  return rows;
}

TEST(AudioManifestTest, ClassesAreIdsOrNamesInByteOrder) {
  // Every label an id: the ids are the labels.
  absl::StatusOr<std::vector<std::string>> names =
      AudioClassNames(Labels({"3", "0", "7"}), "data.train_path");
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_TRUE(names->empty());
  EXPECT_THAT(*AudioClassIds(Labels({"3", "0", "7"}), *names, "f", "m.csv"),
              ElementsAre(3, 0, 7));
  // Any other label: all are names, numbers among them, sorted by bytes.
  names = AudioClassNames(Labels({"yes", "no", "3", "yes", "No"}), "data.train_path");
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_THAT(*names, ElementsAre("3", "No", "no", "yes"));
  EXPECT_THAT(*AudioClassIds(Labels({"yes", "no", "3"}), *names, "f", "m.csv"),
              ElementsAre(3, 2, 0));

  // An eval set's label that the training set does not name, or a name
  // where the training set has ids, names the line and not the label.
  absl::StatusOr<std::vector<int64_t>> ids =
      AudioClassIds(Labels({"yes", "maybe-secret"}), *names, "data.eval_path", "e.csv");
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(std::string(ids.status().message()),
            "data.eval_path: e.csv: line 3: the label names no class of the training set");
  ids = AudioClassIds(Labels({"1", "secret"}), {}, "data.eval_path", "e.csv");
  ASSERT_FALSE(ids.ok());
  EXPECT_THAT(std::string(ids.status().message()),
              HasSubstr("data.eval_path: e.csv: line 3: the label is not a class id"));
  EXPECT_THAT(std::string(ids.status().message()), Not(HasSubstr("secret")));
}

TEST(AudioManifestTest, RelativePathsAreTakenFromTheManifestsDirectory) {
  EXPECT_EQ(ResolveManifestPath("/data/sets/train.csv", "wav/a.wav"), "/data/sets/wav/a.wav");
  EXPECT_EQ(ResolveManifestPath("/data/sets/train.csv", "/other/a.wav"), "/other/a.wav");
  EXPECT_EQ(ResolveManifestPath("train.csv", "a.wav"), "a.wav");
}

}  // namespace
}  // namespace trainctl
