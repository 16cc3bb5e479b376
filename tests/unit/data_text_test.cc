// LoadDatasets over text: CSV text columns (data.text_column) as bytes or
// SentencePiece subwords, padded with an attention_mask, and text files
// under data.tokenizer as next-token windows of subword ids.

#include <dirent.h>

#include <string>
#include <vector>

#include "common/tokenizer_client.h"
#include "tests/unit/data_test_util.h"

namespace trainctl::train::data_testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

class TextDataTest : public DataTest {
 protected:
  void SetUp() override {
    DataTest::SetUp();
    setenv("TRAINCTL_TOKENIZER", TRAINCTL_BIN_DIR "/trainctl-tokenizer", 1);
    setenv("TMPDIR", dir_.c_str(), 1);
  }
  void TearDown() override {
    unsetenv("TMPDIR");
    DataTest::TearDown();
  }

  static v1::JobSpec CsvTextSpec(const std::string& train, const std::string& eval = "") {
    v1::JobSpec spec = Spec("csv");
    v1::DataSpec* d = spec.mutable_data();
    d->set_train_path(train);
    d->set_eval_path(eval);
    d->set_header(true);
    d->set_text_column("text");
    d->set_seq_len(6);
    return spec;
  }

  std::string Model() {
    std::string text;
    for (int i = 0; i < 300; ++i) {
      text += i % 2 ? "the cat sat on the mat\n" : "a dog ran far away home\n";
    }
    TokenizerTraining t;
    t.inputs = {Write("corpus.txt", text)};
    t.output = dir_ + "/m.model";
    t.vocab_size = 20;
    const absl::StatusOr<TokenizerInfo> trained = TrainTokenizer(t);
    EXPECT_TRUE(trained.ok()) << trained.status();
    return t.output;
  }

  // Files in dir_ whose names start with `prefix`.
  int FilesStartingWith(const std::string& prefix) {
    int count = 0;
    DIR* dir = opendir(dir_.c_str());
    while (dirent* e = readdir(dir)) count += std::string(e->d_name).rfind(prefix, 0) == 0;
    closedir(dir);
    return count;
  }
};

TEST_F(TextDataTest, ACsvTextColumnIsBytesPaddedWithAMaskAndNamedLabels) {
  const std::string train = Write("train.csv",
                                  "text,label\n\"ab,\nc\",pos\nabcdefgh,neg\n\"\",pos\n");
  const std::string eval = Write("eval.csv", "text,label\nzz,neg\n");
  absl::StatusOr<Datasets> ds = LoadDatasets(CsvTextSpec(train, eval));
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_THAT(ds->info.input_shape, ElementsAre(6));
  EXPECT_TRUE(ds->info.integer_inputs);
  EXPECT_EQ(ds->info.vocab_size, 256);
  EXPECT_EQ(ds->info.num_classes, 2);  // neg = 0, pos = 1
  EXPECT_THAT(ds->info.input_names, ElementsAre("input_ids", "attention_mask"));
  const Batch b = ds->train->Gather({0, 1, 2});
  EXPECT_TRUE(torch::equal(b.inputs[0], I64({'a', 'b', ',', '\n', 'c', 0})));
  EXPECT_TRUE(torch::equal(b.inputs[1], I64({'a', 'b', 'c', 'd', 'e', 'f'})));  // cut
  ASSERT_EQ(b.more_inputs.size(), 1u);
  EXPECT_TRUE(torch::equal(b.more_inputs[0].second,
                           I64({1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0})
                               .reshape({3, 6})));  // an empty text keeps one position
  EXPECT_TRUE(torch::equal(b.targets, I64({1, 0, 1})));
  EXPECT_TRUE(torch::equal(ds->eval->Gather({0}).targets, I64({0})));
}

TEST_F(TextDataTest, AnEvalLabelTheTrainingSetLacksIsRefusedUnquoted) {
  const std::string train = Write("train.csv", "text,label\na,pos\nb,neg\n");
  const std::string eval = Write("eval.csv", "text,label\nc,secret-label\n");
  absl::StatusOr<Datasets> ds = LoadDatasets(CsvTextSpec(train, eval));
  ASSERT_FALSE(ds.ok());
  EXPECT_EQ(ds.status().message(), "data.eval_path: " + eval +
                                       ": line 2: the label names no class of the training set");
}

TEST_F(TextDataTest, ATokenizerGivesSubwordIdsPaddedWithItsPadId) {
  const std::string model = Model();
  const std::string train = Write("train.csv", "text,label\nthe cat sat,0\nthe,1\n");
  v1::JobSpec spec = CsvTextSpec(train);
  spec.mutable_data()->set_tokenizer(model);
  spec.mutable_data()->set_seq_len(16);
  absl::StatusOr<Datasets> ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->info.vocab_size, 20);
  absl::StatusOr<std::vector<std::vector<int32_t>>> want =
      EncodeTexts(model, "m", {"the cat sat", "the"});
  ASSERT_TRUE(want.ok());
  const Batch b = ds->train->Gather({0, 1});
  for (int i = 0; i < 2; ++i) {
    const std::vector<int32_t>& ids = (*want)[static_cast<size_t>(i)];
    ASSERT_LT(ids.size(), 16u);
    for (size_t t = 0; t < 16; ++t) {
      EXPECT_EQ(b.inputs[i][static_cast<int64_t>(t)].item<int64_t>(), t < ids.size() ? ids[t] : 3);
      EXPECT_EQ(b.more_inputs[0].second[i][static_cast<int64_t>(t)].item<int64_t>(),
                t < ids.size() ? 1 : 0);
    }
  }
}

TEST_F(TextDataTest, TextUnderATokenizerIsWindowsOfSubwordIdsEachLineEndedByEos) {
  const std::string model = Model();
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the cat sat on the mat\n";
  v1::JobSpec spec = Spec("text");
  spec.mutable_data()->set_train_path(Write("story.txt", text));
  spec.mutable_data()->set_tokenizer(model);
  spec.mutable_data()->set_seq_len(8);
  absl::StatusOr<std::vector<std::vector<int32_t>>> line =
      EncodeTexts(model, "m", {"the cat sat on the mat"});
  ASSERT_TRUE(line.ok());
  std::vector<int64_t> stream;
  for (int i = 0; i < 40; ++i) {
    stream.insert(stream.end(), (*line)[0].begin(), (*line)[0].end());
    stream.push_back(2);
  }
  const int files_before = FilesStartingWith("");
  absl::StatusOr<Datasets> ds = LoadDatasets(spec);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->info.vocab_size, 20);
  EXPECT_EQ(ds->train->size(), static_cast<int64_t>(stream.size() - 1) / 8);
  const Batch b = ds->train->Gather({1});
  for (int64_t t = 0; t < 8; ++t) {
    EXPECT_EQ(b.inputs[0][t].item<int64_t>(), stream[static_cast<size_t>(8 + t)]);
    EXPECT_EQ(b.targets[0][t].item<int64_t>(), stream[static_cast<size_t>(9 + t)]);
  }
  // The ids' file has no name: the scratch directory ($TMPDIR) holds only
  // what the test wrote.
  EXPECT_EQ(FilesStartingWith(""), files_before);
  // Too little text for one window names the file and the tokenizer.
  spec.mutable_data()->set_seq_len(4096);
  ds = LoadDatasets(spec);
  ASSERT_FALSE(ds.ok());
  EXPECT_THAT(std::string(ds.status().message()),
              HasSubstr("tokens (data.tokenizer's) is too few for one window of seq_len 4096"));
  EXPECT_EQ(FilesStartingWith(""), files_before);
}

}  // namespace
}  // namespace trainctl::train::data_testing
