// SentencePiece subwords through the service: a tokenizer trained by
// `trainctl tokenizer train --spec` from the job's own training set, then
// the GPT example on the fortunes text and the transformer classifier on a
// CSV text column (fortunes by topic, examples/make_fortune_topics.sh).
// The dry run's sample counts, which a worker's probe makes by running the
// tokenizer, must be the ranks' own.

#include <gmock/gmock.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "local_cluster.h"

namespace trainctl::testing {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

// The plan metric's value of `key` (-1 when absent).
double PlanValue(LocalCluster& cluster, const std::string& id, const std::string& key) {
  for (const v1::JobEvent& e : cluster.Events(id)) {
    if (e.has_metric() && e.metric().kind() == "plan") {
      auto it = e.metric().values().find(key);
      return it == e.metric().values().end() ? -1 : it->second;
    }
  }
  return -1;
}

// The training samples a dry run of `spec` counts (-1 when it could not).
// `absolute` sets its relative paths to where they lie: a worker's probe
// counts files it can open, and shipped files reach only the ranks.
int64_t DryRunSamples(LocalCluster& cluster, const std::string& spec,
                      const std::vector<std::string>& absolute) {
  std::vector<std::string> args = {"submit", spec, "--dry-run", "--output", "json"};
  for (const std::string& set : absolute) {
    args.push_back("--set");
    args.push_back(set);
  }
  CliResult dry = cluster.Cli(args, seconds(120));
  EXPECT_EQ(dry.exit_code, 0) << dry.output;
  v1::SubmitJobResponse response;
  // Past the "uploaded FILE" lines (stderr) that shipping the relative paths prints.
  const std::string json = dry.output.substr(std::min(dry.output.find('{'), dry.output.size()));
  const auto parsed = google::protobuf::util::JsonStringToMessage(json, &response);
  EXPECT_TRUE(parsed.ok()) << parsed.ToString() << "\n" << dry.output;
  if (!parsed.ok()) return -1;
  EXPECT_EQ(response.plan().data_note(), "");
  return response.plan().train_samples();
}

int RunShell(const std::string& command, const std::string& log) {
  return std::system((command + " > " + log + " 2>&1").c_str());
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

TEST(SubwordTextTest, TheGptExampleTrainsOnATokenizerOfItsOwnText) {
  LocalCluster cluster(2, 1, 1);
  const std::string spec = cluster.dir() + "/fortunes-gpt-subwords.yaml";
  const std::string log = cluster.dir() + "/tokenizer.log";
  ASSERT_EQ(RunShell("cp " TRAINCTL_SOURCE_DIR "/examples/fortunes-gpt-subwords.yaml " + spec, log), 0);
  ASSERT_EQ(RunShell(std::string(TRAINCTL_BIN_DIR) + "/trainctl tokenizer train --spec " + spec +
                    " --vocab-size 1000 -o " + cluster.dir() + "/fortunes-cookie.model",
                log),
            0)
      << ReadAll(log);
  EXPECT_THAT(ReadAll(log), HasSubstr("1000 pieces (unigram)"));
  const int64_t counted = DryRunSamples(
      cluster, spec, {"data.tokenizer=" + cluster.dir() + "/fortunes-cookie.model"});

  CliResult submit = cluster.Cli({"submit", spec, "--follow"}, seconds(600));
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const v1::Job job = cluster.GetJob(JobIdFrom(submit.output));
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.reason();
  EXPECT_EQ(PlanValue(cluster, job.id(), "vocab_size"), 1000);
  // The probe's windows, less the eval split, are the ranks' training windows.
  const double train = PlanValue(cluster, job.id(), "train_samples");
  const double eval = PlanValue(cluster, job.id(), "eval_samples");
  EXPECT_EQ(counted, static_cast<int64_t>(train));
  // Subwords: far fewer windows than the 245 093 bytes make (3829).
  EXPECT_LT(train + eval, 2000);
  const double loss = job.latest_eval().values().at("eval_loss");
  std::cout << "fortunes GPT on 1000 subwords: eval loss " << loss << " nats/token (uniform "
            << std::log(1000.0) << ")" << std::endl;
  EXPECT_LT(loss, 5.0);
}

TEST(SubwordTextTest, ATransformerClassifierLearnsTopicsFromACsvTextColumn) {
  LocalCluster cluster(2, 1, 1);
  const std::string out = cluster.dir() + "/topics";
  const std::string log = cluster.dir() + "/make.log";
  ASSERT_EQ(RunShell("TRAINCTL=" TRAINCTL_BIN_DIR "/trainctl bash " TRAINCTL_SOURCE_DIR
                "/examples/make_fortune_topics.sh " + out,
                log),
            0)
      << ReadAll(log);
  const int64_t counted =
      DryRunSamples(cluster, out + "/job.yaml",
                    {"data.train_path=" + out + "/train.csv", "data.eval_path=" + out + "/eval.csv",
                     "data.tokenizer=" + out + "/topics.model"});

  CliResult submit = cluster.Cli({"submit", out + "/job.yaml", "--follow"}, seconds(600));
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const v1::Job job = cluster.GetJob(JobIdFrom(submit.output));
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.reason();
  EXPECT_EQ(PlanValue(cluster, job.id(), "vocab_size"), 2000);
  // Every fortune a row, though each spans several lines of the CSV file.
  EXPECT_EQ(counted, static_cast<int64_t>(PlanValue(cluster, job.id(), "train_samples")));
  EXPECT_EQ(counted, 2202);
  const double accuracy = job.latest_eval().values().at("eval_accuracy");
  std::cout << "fortune topics on 2000 subwords: eval accuracy " << accuracy
            << " (4 topics; the majority class is 0.40 of the eval set)" << std::endl;
  EXPECT_GE(accuracy, 0.5);
}

}  // namespace
}  // namespace trainctl::testing
