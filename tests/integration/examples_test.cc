// The shipped examples, run as a user would: `trainctl submit --follow` on a
// coordinator and two workers. Long (minutes on 2 cores): labelled `slow`,
// run by `make test-all`.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "local_cluster.h"

namespace trainctl::testing {
namespace {

using std::chrono::seconds;

v1::Job RunExample(LocalCluster& cluster, const std::string& name) {
  const std::string path = std::string(TRAINCTL_SOURCE_DIR) + "/examples/" + name;
  CliResult submit = cluster.Cli({"submit", path, "--follow"}, seconds(1500));
  EXPECT_EQ(submit.exit_code, 0) << submit.output;
  const std::string id = JobIdFrom(submit.output);
  EXPECT_FALSE(id.empty()) << submit.output;
  return cluster.GetJob(id);
}

TEST(ExamplesTest, FashionMnistMlpReachesEightyFivePercent) {
  LocalCluster cluster(2, 1, 1);
  v1::Job job = RunExample(cluster, "fashion-mnist-mlp.yaml");
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.reason();
  const double accuracy = job.latest_eval().values().at("eval_accuracy");
  std::cout << "fashion-mnist-mlp test accuracy " << accuracy << std::endl;
  EXPECT_GE(accuracy, 0.85);
}

TEST(ExamplesTest, FashionMnistCnnReachesNinetyPercent) {
  LocalCluster cluster(2, 1, 1);
  v1::Job job = RunExample(cluster, "fashion-mnist-cnn.yaml");
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.reason();
  EXPECT_LE(job.spec().training().epochs(), 5);
  const double accuracy = job.latest_eval().values().at("eval_accuracy");
  std::cout << "fashion-mnist-cnn test accuracy " << accuracy << std::endl;
  EXPECT_GE(accuracy, 0.90);
}

// Random crops, flips and normalisation by the training set's statistics
// (data.transforms), as torchvision users train it.
TEST(ExamplesTest, FashionMnistCnnAugmentedReachesNinetyTwoPercent) {
  LocalCluster cluster(2, 1, 1);
  v1::Job job = RunExample(cluster, "fashion-mnist-cnn-augmented.yaml");
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.reason();
  const double accuracy = job.latest_eval().values().at("eval_accuracy");
  std::cout << "fashion-mnist-cnn-augmented test accuracy " << accuracy << std::endl;
  EXPECT_GE(accuracy, 0.92);
}

TEST(ExamplesTest, FortunesGptEvalLossBelowTwoNatsPerByte) {
  LocalCluster cluster(2, 1, 1);
  v1::Job job = RunExample(cluster, "fortunes-gpt.yaml");
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.reason();
  const double loss = job.latest_eval().values().at("eval_loss");
  std::cout << "fortunes-gpt eval loss " << loss << " nats/byte" << std::endl;
  EXPECT_LT(loss, 2.0);
}

}  // namespace
}  // namespace trainctl::testing
