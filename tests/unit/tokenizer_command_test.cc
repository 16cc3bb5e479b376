// `trainctl tokenizer` through the CLI's own entry point: the text a person
// reads, -o json for scripts, and the refusals that need no model.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "client/commands.h"
#include "tests/unit/temp_dir_test.h"

namespace trainctl::client {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

class TokenizerCommandTest : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    setenv("TRAINCTL_TOKENIZER", TRAINCTL_BIN_DIR "/trainctl-tokenizer", 1);
    unsetenv("TRAINCTL_OUTPUT");
    std::string lines;
    const char* words[] = {"red", "green", "blue", "fish", "swims", "under", "the", "boat"};
    for (int i = 0; i < 600; ++i) {
      lines += std::string(words[i % 8]) + " " + words[(i * 3) % 8] + " " + words[(i * 5) % 7] +
               "\n";
    }
    corpus_ = Write("corpus.txt", lines);
  }

  int Run(std::vector<std::string> args) {
    args.insert(args.begin(), "trainctl");
    std::vector<const char*> argv;
    for (const std::string& a : args) argv.push_back(a.c_str());
    out_.str("");
    err_.str("");
    return RunCli(static_cast<int>(argv.size()), argv.data(), out_, err_);
  }

  std::string corpus_;
  std::ostringstream out_, err_;
};

TEST_F(TokenizerCommandTest, TrainSaysWhatItWroteAsTextOrJson) {
  const std::string model = dir_ + "/m.model";
  ASSERT_EQ(Run({"tokenizer", "train", corpus_, "--vocab-size", "30", "-o", model}), 0)
      << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("wrote " + model + ": 30 pieces (unigram)"));
  EXPECT_THAT(out_.str(), HasSubstr("ids: <unk> 0, <s> 1, </s> 2, <pad> 3"));

  ASSERT_EQ(Run({"-o", "json", "tokenizer", "train", corpus_, "--vocab-size", "24",
                 "--model-type", "bpe", "-o", model}),
            0)
      << err_.str();
  EXPECT_EQ(out_.str(), "{\"file\":\"" + model +
                            "\",\"pieces\":24,\"model_type\":\"bpe\",\"unk_id\":0,\"bos_id\":1,"
                            "\"eos_id\":2,\"pad_id\":3}\n");
}

TEST_F(TokenizerCommandTest, EncodePrintsALineOfIdsPerTextOrAJsonObjectPerText) {
  const std::string model = dir_ + "/m.model";
  ASSERT_EQ(Run({"tokenizer", "train", corpus_, "--vocab-size", "30", "-o", model}), 0)
      << err_.str();
  ASSERT_EQ(Run({"tokenizer", "encode", model, "red fish", "the boat"}), 0) << err_.str();
  const std::string text = out_.str();
  EXPECT_THAT(text, MatchesRegex("([0-9]+( [0-9]+)*\n){2}"));

  ASSERT_EQ(Run({"tokenizer", "encode", model, "red fish", "the boat", "--output", "json"}), 0)
      << err_.str();
  // The same ids, as JSON arrays.
  std::string expected;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::replace(line.begin(), line.end(), ' ', ',');
    expected += "{\"ids\":[" + line + "]}\n";
  }
  EXPECT_EQ(out_.str(), expected);

  setenv("TRAINCTL_OUTPUT", "json", 1);
  ASSERT_EQ(Run({"tokenizer", "encode", model, "red fish", "the boat"}), 0);
  EXPECT_EQ(out_.str(), expected);
}

TEST_F(TokenizerCommandTest, RefusalsNameWhatIsWrong) {
  EXPECT_EQ(Run({"tokenizer", "train", "-o", dir_ + "/m.model"}), 2);
  EXPECT_THAT(err_.str(), HasSubstr("name the text files to train on, or --spec JOB.yaml"));
  EXPECT_EQ(Run({"tokenizer", "train", corpus_, "--spec", "job.yaml", "-o", dir_ + "/m.model"}),
            2);
  EXPECT_THAT(err_.str(), HasSubstr("give input files or --spec, not both"));
  EXPECT_EQ(Run({"tokenizer", "encode", dir_ + "/absent.model", "x"}), 2);
  EXPECT_THAT(err_.str(), HasSubstr("absent.model"));
}

}  // namespace
}  // namespace trainctl::client
