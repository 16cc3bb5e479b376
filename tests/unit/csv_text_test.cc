// CSV records with cells across lines (csv_records.h), the rows of a CSV
// text column (csv_text_rows.h) and class labels by id or name
// (class_labels.h). No error quotes a cell: the files are users' data.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/class_labels.h"
#include "common/csv_records.h"
#include "common/csv_text_rows.h"

namespace trainctl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

std::vector<std::vector<std::string>> AllRecords(const std::string& text, char delimiter = ',',
                                                 std::vector<int64_t>* lines = nullptr) {
  CsvRecordReader reader(text, delimiter);
  std::vector<std::vector<std::string>> records;
  std::vector<std::string> fields;
  for (;;) {
    absl::StatusOr<bool> more = reader.Next(&fields);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    records.push_back(fields);
    if (lines != nullptr) lines->push_back(reader.line());
  }
  return records;
}

TEST(CsvRecordReaderTest, AQuotedCellMaySpanLinesAndLinesAreCountedThroughIt) {
  std::vector<int64_t> lines;
  const auto records = AllRecords(
      "\xEF\xBB\xBFtext,label\r\n\"one\ntwo, \"\"three\"\"\",1\r\n\n  \nplain,0\n\"last\"", ',',
      &lines);
  ASSERT_EQ(records.size(), 4u);
  EXPECT_THAT(records[0], ElementsAre("text", "label"));
  EXPECT_THAT(records[1], ElementsAre("one\ntwo, \"three\"", "1"));
  EXPECT_THAT(records[2], ElementsAre("plain", "0"));
  EXPECT_THAT(records[3], ElementsAre("last"));
  EXPECT_THAT(lines, ElementsAre(1, 2, 6, 7));
  EXPECT_THAT(AllRecords("a;\"b;c\"\n", ';')[0], ElementsAre("a", "b;c"));
  EXPECT_THAT(AllRecords("a,,\n")[0], ElementsAre("a", "", ""));
}

TEST(CsvRecordReaderTest, AMalformedRecordIsRefusedWithoutQuotingIt) {
  for (const std::string& text : {std::string("ok,1\n\"secret never closed,1\n"),
                                  std::string("ok,1\nse\"cret,1\n"),
                                  std::string("ok,1\n\"secret\"x,1\n")}) {
    CsvRecordReader reader(text, ',');
    std::vector<std::string> fields;
    ASSERT_TRUE(*reader.Next(&fields));
    absl::StatusOr<bool> bad = reader.Next(&fields);
    ASSERT_FALSE(bad.ok()) << text;
    EXPECT_EQ(reader.line(), 2);
    EXPECT_THAT(std::string(bad.status().message()), Not(HasSubstr("secret")));
  }
}

v1::DataSpec CsvText(const std::string& text_column, const std::string& label_column = "",
                     bool header = true) {
  v1::DataSpec data;
  data.set_format("csv");
  data.set_header(header);
  data.set_delimiter(",");
  data.set_text_column(text_column);
  data.set_label_column(label_column);
  return data;
}

TEST(CsvTextRowsTest, TextAndLabelColumnsAreFoundByNameOrIndex) {
  const std::string file = "id,review,stars\n7,\"good, really\nyes\", 5 \n8,bad,1\n9,ok,3\n";
  absl::StatusOr<CsvTextRows> rows =
      ParseCsvTextRows(file, CsvText("review", "stars"), "data.train_path", "r.csv");
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(rows->texts, ElementsAre("good, really\nyes", "bad", "ok"));
  EXPECT_THAT(rows->labels, ElementsAre("5", "1", "3"));
  EXPECT_THAT(rows->lines, ElementsAre(2, 4, 5));
  // The label defaults to the last column; indexes need no header.
  rows = ParseCsvTextRows("1,hello,a\n2,world,b\n", CsvText("1", "", false), "f", "x.csv", 1);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(rows->texts, ElementsAre("hello"));
  EXPECT_THAT(rows->labels, ElementsAre("a"));
  // Without labels one column will do (trainctl tokenizer train).
  rows = ParseCsvTextRows("t\nx\ny\n", CsvText("t"), "input", "t.csv", 0, /*labels=*/false);
  ASSERT_TRUE(rows.ok()) << rows.status();
  EXPECT_THAT(rows->texts, ElementsAre("x", "y"));
}

TEST(CsvTextRowsTest, ErrorsNameTheFieldFileAndLineButNoCell) {
  const std::string header = "secret_header_name,label\n";
  auto error = [](const std::string& file, const v1::DataSpec& data) {
    absl::StatusOr<CsvTextRows> rows = ParseCsvTextRows(file, data, "data.train_path", "p.csv");
    EXPECT_FALSE(rows.ok());
    const std::string message(rows.status().message());
    EXPECT_THAT(message, Not(HasSubstr("secret")));
    return message;
  };
  EXPECT_EQ(error(header + "a,1\n", CsvText("review")),
            "data.text_column: no column named 'review' in the header of p.csv (the header has "
            "2 columns)");
  EXPECT_EQ(error(header + "a,1\nsecret,2,3\n", CsvText("0")),
            "data.train_path: p.csv:3: has 3 columns, expected 2");
  EXPECT_EQ(error(header + "secret,\n", CsvText("0")),
            "data.train_path: p.csv:2: column 1 (the label) is empty");
  EXPECT_THAT(error(header + "a,1\n", CsvText("0", "0")), HasSubstr("data.text_column: is the "
                                                                    "label column too"));
  EXPECT_EQ(error(header, CsvText("0")), "data.train_path: p.csv: no data rows");
  EXPECT_EQ(error("secret\n", CsvText("0", "", false)),
            "data.train_path: p.csv:1: has 1 column; a text column and a label column are needed");
  EXPECT_THAT(error("a,1\n", CsvText("review", "", false)),
              HasSubstr("'review' is a column name, which needs a header row"));
}

TEST(ClassLabelsTest, IdsWhenEveryLabelIsOneElseNamesInByteOrder) {
  absl::StatusOr<std::vector<std::string>> names = ClassNamesOf({"3", "0", "7"}, "f");
  ASSERT_TRUE(names.ok());
  EXPECT_TRUE(names->empty());
  EXPECT_THAT(*ClassIdsOf({"3", "0"}, {2, 3}, *names, "f", "a.csv"), ElementsAre(3, 0));
  names = ClassNamesOf({"pos", "neg", "pos", "3"}, "f");
  EXPECT_THAT(*names, ElementsAre("3", "neg", "pos"));
  EXPECT_THAT(*ClassIdsOf({"pos", "neg"}, {2, 3}, *names, "f", "a.csv"), ElementsAre(2, 1));
  absl::StatusOr<std::vector<int64_t>> unknown =
      ClassIdsOf({"pos", "secret"}, {2, 9}, *names, "data.eval_path", "e.csv");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().message(),
            "data.eval_path: e.csv: line 9: the label names no class of the training set");
}

}  // namespace
}  // namespace trainctl
