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
#include <optional>
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

// Runs hf_export.sh with `args`; its output, or nullopt (the test then
// skips) when transformers cannot be installed.
std::optional<std::string> HfExport(LocalCluster& cluster, const std::string& args) {
  const std::string log = cluster.dir() + "/export.log";
  const std::string command =
      "TRAINCTL_BUILD_DIR=" TRAINCTL_BIN_DIR "/.. TRAINCTL_TORCH_PYTHON=" TRAINCTL_TORCH_PYTHON
      " bash " TRAINCTL_SOURCE_DIR "/tests/integration/hf_export.sh " + args + " > " + log +
      " 2>&1";
  const int status = std::system(command.c_str());
  std::ifstream in(log);
  const std::string output((std::istreambuf_iterator<char>(in)), {});
  if (WIFEXITED(status) && WEXITSTATUS(status) == 77) return std::nullopt;
  EXPECT_EQ(status, 0) << output;
  return output;
}

// The number after `label` in `output`, or -1.
double Number(const std::string& output, const std::string& label) {
  std::smatch m;
  if (!std::regex_search(output, m, std::regex(label + " ([0-9.]+)"))) return -1;
  return std::stod(m[1]);
}

TEST_P(HfClassifierTest, ARandomBertLearnsSentimentFromPaddedNamedInputs) {
  LocalCluster cluster(2, 1, 1);
  const std::string csvs =
      " --train-csv " + cluster.WriteFile("train.csv", SentimentCsv(800, 1)) +
      " --eval-csv " + cluster.WriteFile("eval.csv", SentimentCsv(200, 2)) +
      " --max-length 24";
  const std::string out = cluster.dir() + "/bert";
  std::optional<std::string> exported = HfExport(
      cluster, "--random-bert" + csvs + " --format " + GetParam() + " --out " + out);
  if (!exported) GTEST_SKIP() << "transformers could not be installed";
  EXPECT_THAT(*exported, ::testing::HasSubstr(
                             "forward(input_ids, attention_mask, token_type_ids)"));
  const double before = Number(*exported, "eval accuracy before training");
  ASSERT_GE(before, 0) << *exported;

  CliResult submit = cluster.Cli({"submit", out + "/job.yaml", "--follow"}, seconds(600));
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const std::string id = JobIdFrom(submit.output);
  v1::Job job = cluster.GetJob(id);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.reason();
  const double after = job.latest_eval().values().at("eval_accuracy");
  std::cout << "BERT eval accuracy: before training " << before << ", fine-tuned " << after
            << std::endl;
  EXPECT_GE(after, 0.95);
  EXPECT_GE(after - before, 0.3);
  if (std::string(GetParam()) != "tensors") return;

  // Back to transformers: the job's weights, exported, load into the
  // Hugging Face model and score as the job did (to one sample: Python
  // batches the eval set differently); that saved model is then a
  // pre-trained one, which --model exports again with its trained head.
  const std::string weights = out + "/fine-tuned.safetensors";
  CliResult exported_weights = cluster.Cli({"export", id, "-o", weights});
  ASSERT_EQ(exported_weights.exit_code, 0) << exported_weights.output;
  std::optional<std::string> imported =
      HfExport(cluster, "--import-trained " + weights + " --out " + out);
  ASSERT_TRUE(imported.has_value());
  EXPECT_NEAR(Number(*imported, "fine-tuned eval accuracy"), after, 1.0 / 200 + 1e-9)
      << *imported;
  std::optional<std::string> again = HfExport(
      cluster, "--model " + out + "/fine-tuned" + csvs + " --out " + cluster.dir() + "/again");
  ASSERT_TRUE(again.has_value());
  EXPECT_NEAR(Number(*again, "eval accuracy before training"), after, 1.0 / 200 + 1e-9)
      << *again;
}

INSTANTIATE_TEST_SUITE_P(Formats, HfClassifierTest, ::testing::Values("tensors", "npy"));

}  // namespace
}  // namespace trainctl::testing
