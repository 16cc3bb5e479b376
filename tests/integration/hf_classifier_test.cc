// A Hugging Face classifier fine-tuned through the service, the way the
// course's students come with one: examples/export_hf_classifier.py (run by
// hf_export.sh with `transformers` from PyPI and the torch of this build's
// LibTorch) traces a small randomly initialised BertConfig model and
// tokenizes a text set into input_ids, attention_mask and token_type_ids,
// padded, into a tensors file or NumPy arrays; the job.yaml it writes is
// submitted as it is.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <random>
#include <regex>
#include <string>

#include "local_cluster.h"

namespace trainctl::testing {
namespace {

using std::chrono::seconds;

// Sentences of 4 to 13 words, one of them carrying the label (1 positive,
// 0 negative) among neutral fillers, as CSV with a text,label header.
std::string SentimentCsv(int rows, uint32_t seed) {
  const std::vector<std::string> good = {"great", "wonderful", "superb",
                                         "delightful", "excellent", "lovely"};
  const std::vector<std::string> bad = {"awful", "terrible", "dreadful",
                                        "boring", "poor", "horrible"};
  const std::vector<std::string> filler = {
      "the", "film", "movie", "plot", "acting", "was", "really", "quite",
      "and", "story", "very", "i", "thought", "it", "honestly", "overall"};
  std::mt19937 rng(seed);
  auto pick = [&](const std::vector<std::string>& words) {
    return words[rng() % words.size()];
  };
  std::string csv = "text,label\n";
  for (int r = 0; r < rows; ++r) {
    const int label = static_cast<int>(rng() % 2);
    std::vector<std::string> words(3 + rng() % 10);
    for (auto& w : words) w = pick(filler);
    words.insert(words.begin() + rng() % (words.size() + 1), pick(label ? good : bad));
    std::string text;
    for (const auto& w : words) text += (text.empty() ? "" : " ") + w;
    csv += text + "," + std::to_string(label) + "\n";
  }
  return csv;
}

// The data as one tensors file, or as NumPy arrays named by train_inputs.
class HfClassifierTest : public ::testing::TestWithParam<const char*> {};

TEST_P(HfClassifierTest, ARandomBertLearnsSentimentFromPaddedNamedInputs) {
  LocalCluster cluster(2, 1, 1);
  const std::string train = cluster.WriteFile("train.csv", SentimentCsv(800, 1));
  const std::string eval = cluster.WriteFile("eval.csv", SentimentCsv(200, 2));
  const std::string out = cluster.dir() + "/bert";
  const std::string log = cluster.dir() + "/export.log";
  const std::string command =
      "TRAINCTL_BUILD_DIR=" TRAINCTL_BIN_DIR "/.. TRAINCTL_TORCH_PYTHON=" TRAINCTL_TORCH_PYTHON
      " bash " TRAINCTL_SOURCE_DIR "/tests/integration/hf_export.sh --random-bert"
      " --train-csv " + train + " --eval-csv " + eval + " --max-length 24 --format " + GetParam() + " --out " + out +
      " > " + log + " 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream in(log);
  const std::string output((std::istreambuf_iterator<char>(in)), {});
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) GTEST_SKIP() << output;
  ASSERT_EQ(status, 0) << output;
  std::smatch untrained;
  ASSERT_TRUE(std::regex_search(output, untrained,
                                std::regex("untrained eval accuracy ([0-9.]+)")))
      << output;
  EXPECT_THAT(output, ::testing::HasSubstr(
                          "forward(input_ids, attention_mask, token_type_ids)"));

  CliResult submit = cluster.Cli({"submit", out + "/job.yaml", "--follow"}, seconds(600));
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  v1::Job job = cluster.GetJob(JobIdFrom(submit.output));
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.reason();
  const double before = std::stod(untrained[1]);
  const double after = job.latest_eval().values().at("eval_accuracy");
  std::cout << "BERT eval accuracy: untrained " << before << ", fine-tuned " << after
            << std::endl;
  EXPECT_GE(after, 0.95);
  EXPECT_GE(after - before, 0.3);
}

INSTANTIATE_TEST_SUITE_P(Formats, HfClassifierTest, ::testing::Values("tensors", "npy"));

}  // namespace
}  // namespace trainctl::testing
