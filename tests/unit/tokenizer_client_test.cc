// SentencePiece through trainctl-tokenizer (tokenizer_client.h): training a
// model on text lines and on records, its ids, encoding files and texts,
// and errors that name the field and file but never quote a text. Also the
// child-process runner under it (helper_process.h).

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common/helper_process.h"
#include "common/tokenizer_client.h"
#include "tests/unit/temp_dir_test.h"

namespace trainctl {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class TokenizerClientTest : public testing::TempDirTest {
 protected:
  void SetUp() override {
    TempDirTest::SetUp();
    setenv("TRAINCTL_TOKENIZER", TRAINCTL_BIN_DIR "/trainctl-tokenizer", 1);
  }

  // Sentences of a small vocabulary, one a line.
  std::vector<std::string> Sentences(int count) {
    const std::vector<std::string> words = {"the", "quick", "brown", "fox", "jumps", "over",
                                            "lazy", "dog", "and", "runs", "away", "home"};
    std::mt19937 rng(7);
    std::vector<std::string> out;
    for (int i = 0; i < count; ++i) {
      std::string s;
      for (int w = 0; w < 3 + static_cast<int>(rng() % 8); ++w) {
        s += (w ? " " : "") + words[rng() % words.size()];
      }
      out.push_back(s);
    }
    return out;
  }

  std::string TrainModel(int vocab = 40) {
    std::string lines;
    for (const std::string& s : Sentences(2000)) lines += s + "\n";
    TokenizerTraining t;
    t.inputs = {Write("corpus.txt", lines)};
    t.output = dir_ + "/m.model";
    t.vocab_size = vocab;
    absl::StatusOr<TokenizerInfo> info = TrainTokenizer(t);
    EXPECT_TRUE(info.ok()) << info.status();
    return t.output;
  }
};

TEST_F(TokenizerClientTest, ATrainedModelHasItsVocabularyAndTheSpecialIds) {
  const std::string model = TrainModel(40);
  absl::StatusOr<TokenizerInfo> info = ReadTokenizerInfo(model, "data.tokenizer");
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->pieces, 40);
  EXPECT_EQ(info->unk_id, 0);
  EXPECT_EQ(info->bos_id, 1);
  EXPECT_EQ(info->eos_id, 2);
  EXPECT_EQ(info->pad_id, 3);
}

TEST_F(TokenizerClientTest, EncodingLinesEndsEachWithEosAsEncodingTextsWouldNot) {
  const std::string model = TrainModel();
  const std::vector<std::string> texts = {"the quick brown fox", "lazy dog runs home"};
  absl::StatusOr<std::vector<std::vector<int32_t>>> ids =
      EncodeTexts(model, "data.tokenizer", texts);
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_EQ(ids->size(), 2u);
  for (const auto& row : *ids) {
    EXPECT_FALSE(row.empty());
    for (int32_t id : row) EXPECT_TRUE(id >= 4 && id < 40) << id;  // no special ids
  }
  // Lines: CRLF and empty lines as a text editor leaves them.
  const std::string text = Write("t.txt", texts[0] + "\r\n\n" + texts[1] + "\n");
  const std::string out = dir_ + "/ids.u32";
  const int fd = ::open(out.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  absl::StatusOr<int64_t> tokens =
      EncodeTextLines(model, "data.tokenizer", text, "data.train_path", fd);
  ::close(fd);
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  std::vector<int32_t> want = (*ids)[0];
  want.push_back(2);
  want.insert(want.end(), (*ids)[1].begin(), (*ids)[1].end());
  want.push_back(2);
  EXPECT_EQ(*tokens, static_cast<int64_t>(want.size()));
  std::ifstream in(out, std::ios::binary);
  std::vector<int32_t> got(want.size() + 1);
  in.read(reinterpret_cast<char*>(got.data()), static_cast<std::streamsize>(got.size() * 4));
  got.resize(static_cast<size_t>(in.gcount() / 4));
  EXPECT_EQ(got, want);
}

TEST_F(TokenizerClientTest, TrainingOnRecordsKeepsTextsWithNewlinesWhole) {
  std::vector<std::string> texts = Sentences(500);
  for (size_t i = 0; i < texts.size(); i += 3) texts[i] += "\nand home";
  const std::string records = dir_ + "/texts.records";
  ASSERT_TRUE(WriteTextRecords(texts, records).ok());
  TokenizerTraining t;
  t.inputs = {records};
  t.records = true;
  t.output = dir_ + "/r.model";
  t.vocab_size = 40;
  t.model_type = "bpe";
  absl::StatusOr<TokenizerInfo> info = TrainTokenizer(t);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->pieces, t.vocab_size);
  absl::StatusOr<std::vector<std::vector<int32_t>>> ids =
      EncodeTexts(t.output, "data.tokenizer", {texts[0], ""});
  ASSERT_TRUE(ids.ok()) << ids.status();
  EXPECT_FALSE((*ids)[0].empty());
  EXPECT_TRUE((*ids)[1].empty());
}

TEST_F(TokenizerClientTest, LongTextsCountAndAnyFileNameWillDo) {
  // 'x', 'y' and 'z' are only in one text of 6000 bytes, which SentencePiece's
  // default would skip (over 4192); a comma would split its input list.
  std::string lines;
  for (int i = 0; i < 200; ++i) lines += "abc cab bca\n";
  std::string longest;
  while (longest.size() < 6000) longest += "xyz zyx ";
  lines += longest + "\n";
  TokenizerTraining t;
  t.inputs = {Write("with,comma.txt", lines)};
  t.output = dir_ + "/c.model";
  t.vocab_size = 12;
  t.model_type = "char";
  t.character_coverage = 1.0;
  absl::StatusOr<TokenizerInfo> info = TrainTokenizer(t);
  ASSERT_TRUE(info.ok()) << info.status();
  absl::StatusOr<std::vector<std::vector<int32_t>>> ids =
      EncodeTexts(t.output, "data.tokenizer", {"xyz"});
  ASSERT_TRUE(ids.ok()) << ids.status();
  ASSERT_FALSE((*ids)[0].empty());
  for (int32_t id : (*ids)[0]) EXPECT_NE(id, 0) << "an unknown piece";
  // Nothing to train on is said so.
  t.inputs = {Write("blank.txt", "\n\r\n\n")};
  info = TrainTokenizer(t);
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().message(), "training failed: the inputs hold no text");
}

TEST_F(TokenizerClientTest, FailuresNameTheFieldAndFileButQuoteNoText) {
  const std::string not_a_model = Write("secret.txt", "secret-password-123\n");
  absl::StatusOr<TokenizerInfo> info = ReadTokenizerInfo(not_a_model, "data.tokenizer");
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(info.status().message(),
            "data.tokenizer: " + not_a_model + ": is not a SentencePiece model");
  const std::string model = TrainModel();
  const int null = ::open("/dev/null", O_WRONLY);
  absl::StatusOr<int64_t> missing =
      EncodeTextLines(model, "data.tokenizer", dir_ + "/none.txt", "data.train_path", null);
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("data.train_path: " + dir_ + "/none.txt: cannot open"));
  // A model that does not load is the model field's fault, not the text's.
  absl::StatusOr<int64_t> bad_model =
      EncodeTextLines(not_a_model, "data.tokenizer", not_a_model, "data.train_path", null);
  ::close(null);
  ASSERT_FALSE(bad_model.ok());
  EXPECT_THAT(std::string(bad_model.status().message()), HasSubstr("data.tokenizer: "));
  EXPECT_THAT(std::string(bad_model.status().message()), Not(HasSubstr("password")));
  // Too large a vocabulary: SentencePiece's reason, without its source lines.
  TokenizerTraining t;
  t.inputs = {Write("few.txt", "a b c\n")};
  t.output = dir_ + "/few.model";
  t.vocab_size = 5000;
  absl::StatusOr<TokenizerInfo> trained = TrainTokenizer(t);
  ASSERT_FALSE(trained.ok());
  EXPECT_THAT(std::string(trained.status().message()),
              HasSubstr("training failed: Vocabulary size too high (5000)"));
  EXPECT_THAT(std::string(trained.status().message()), Not(HasSubstr("./src/")));
}

TEST_F(TokenizerClientTest, TheProgramIsFoundBesideThisOneOrNamedByTheEnvironment) {
  EXPECT_EQ(FindSiblingProgram("trainctl-tokenizer"), TRAINCTL_BIN_DIR "/trainctl-tokenizer");
  EXPECT_EQ(FindSiblingProgram("trainctl-no-such-program"), "");
  setenv("TRAINCTL_TOKENIZER", "/opt/elsewhere/trainctl-tokenizer", 1);
  EXPECT_EQ(*FindTokenizerProgram(), "/opt/elsewhere/trainctl-tokenizer");
  absl::StatusOr<TokenizerInfo> info = ReadTokenizerInfo("m.model", "data.tokenizer");
  EXPECT_EQ(info.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(info.status().message()),
              HasSubstr("cannot run /opt/elsewhere/trainctl-tokenizer"));
}

TEST_F(TokenizerClientTest, AChildPastItsDeadlineIsKilledAndStdoutIsKeptApart) {
  const std::string script = Write("slow.sh", "#!/bin/sh\necho out\necho err >&2\nexec sleep 30\n");
  ASSERT_EQ(chmod(script.c_str(), 0700), 0);
  absl::StatusOr<ChildResult> ran =
      RunChild({script}, absl::Now() + absl::Milliseconds(300), /*separate_stdout=*/true);
  ASSERT_TRUE(ran.ok()) << ran.status();
  EXPECT_TRUE(ran->timed_out);
  EXPECT_EQ(ran->exit_code, -9);
  EXPECT_EQ(ran->stdout_text, "out\n");
  EXPECT_EQ(ran->output, "err\n");
  setenv("TRAINCTL_TOKENIZER", script.c_str(), 1);
  absl::StatusOr<TokenizerInfo> info =
      ReadTokenizerInfo("m", "data.tokenizer", absl::Now() + absl::Milliseconds(300));
  EXPECT_EQ(info.status().code(), absl::StatusCode::kDeadlineExceeded);
  ran = RunChild({"/bin/sh", "-c", "echo both; echo two >&2; exit 3"});
  ASSERT_TRUE(ran.ok());
  EXPECT_EQ(ran->exit_code, 3);
  EXPECT_FALSE(ran->timed_out);
  EXPECT_EQ(ran->output, "both\ntwo\n");
  EXPECT_EQ(RunChild({dir_ + "/missing"}).status().code(), absl::StatusCode::kFailedPrecondition);
  // Passed descriptors are the child's 3, 4, ...: here a file with no name.
  FILE* unnamed = std::tmpfile();
  ASSERT_NE(unnamed, nullptr);
  ran = RunChild({"/bin/sh", "-c", "echo to-three > /dev/fd/3"}, absl::InfiniteFuture(), false,
                 {::fileno(unnamed)});
  ASSERT_TRUE(ran.ok());
  EXPECT_EQ(ran->exit_code, 0) << ran->output;
  char got[32] = {};
  ASSERT_EQ(::pread(::fileno(unnamed), got, sizeof got - 1, 0), 9);
  EXPECT_STREQ(got, "to-three\n");
  std::fclose(unnamed);
}


// A rank that dies by itself (a crash, the OOM killer) takes its helper
// with it. This test adopts orphans, so the helper comes back to it.
TEST_F(TokenizerClientTest, AChildDiesWithTheProcessThatRanIt) {
  ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  const std::string pid_file = dir_ + "/helper.pid";
  const pid_t runner = ::fork();
  ASSERT_GE(runner, 0);
  if (runner == 0) {
    (void)RunChild({"/bin/sh", "-c", "echo $$ > " + pid_file + ".part && mv " + pid_file +
                                         ".part " + pid_file + " && exec sleep 60"});
    ::_exit(0);
  }
  pid_t helper = 0;
  for (int i = 0; i < 1000 && helper == 0; ++i) {  // up to 10 s
    std::ifstream in(pid_file);
    if (!(in >> helper)) ::usleep(10000);
  }
  ASSERT_GT(helper, 0) << "the helper never started";
  ::kill(runner, SIGKILL);
  ASSERT_EQ(::waitpid(runner, nullptr, 0), runner);
  int status = 0;
  pid_t reaped = 0;
  for (int i = 0; i < 2000 && reaped == 0; ++i) {  // up to 20 s, well under its 60
    reaped = ::waitpid(helper, &status, WNOHANG);
    if (reaped == 0) ::usleep(10000);
  }
  if (reaped == 0) {
    ::kill(helper, SIGKILL);
    ::waitpid(helper, nullptr, 0);
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, 0);
  ASSERT_EQ(reaped, helper) << "the helper outlived the process that ran it";
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

}  // namespace
}  // namespace trainctl
