// Audio through the service: examples/make_spoken_words.sh synthesises
// eight spoken words with espeak-ng (22.05 kHz WAV files, many voices,
// speeds and pitches; the manifests label each file by its word, so the
// classes are names), and its job.yaml trains the built-in audio_cnn on
// their log-mel spectrograms over two ranks. The eval set's voices are not
// in the training set.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "local_cluster.h"

namespace trainctl::testing {
namespace {

using std::chrono::seconds;

TEST(SpokenWordsTest, AnAudioClassifierLearnsWordsOfVoicesItNeverHeard) {
  ASSERT_EQ(std::system("command -v espeak-ng > /dev/null"), 0)
      << "needs espeak-ng (deploy/install-deps.sh installs it)";
  LocalCluster cluster(2, 1, 1);
  const std::string out = cluster.dir() + "/words";
  const std::string log = cluster.dir() + "/make.log";
  const int made = std::system(("bash " TRAINCTL_SOURCE_DIR "/examples/make_spoken_words.sh " +
                                out + " > " + log + " 2>&1").c_str());
  std::ifstream in(log);
  ASSERT_EQ(made, 0) << std::string((std::istreambuf_iterator<char>(in)), {});

  CliResult submit = cluster.Cli({"submit", out + "/job.yaml", "--follow"}, seconds(600));
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  v1::Job job = cluster.GetJob(JobIdFrom(submit.output));
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.reason();
  EXPECT_EQ(job.spec().data().audio().sample_rate(), 16000);
  const double accuracy = job.latest_eval().values().at("eval_accuracy");
  std::cout << "spoken words, unseen voices: eval accuracy " << accuracy << " (chance 0.125)"
            << std::endl;
  EXPECT_GE(accuracy, 0.8);
}

}  // namespace
}  // namespace trainctl::testing
