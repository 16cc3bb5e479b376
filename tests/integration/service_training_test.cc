// Training features through the whole service (coordinator, two workers,
// rank processes): a TorchScript model exported by the shipped Python
// script, a small character GPT on CSV-free token data, and the
// TensorBoard event file of a job.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <dirent.h>

#include <cstdlib>
#include <map>

#include "local_cluster.h"
#include "tests/unit/tensorboard_reader.h"
#include "worker/support/tensorboard_writer.h"

namespace trainctl::testing {
namespace {

using ::testing::HasSubstr;
using std::chrono::seconds;

class ServiceTrainingTest : public SharedClusterTest {};

TEST_F(ServiceTrainingTest, TorchScriptModelTrainsThroughTheService) {
  const std::string model = cluster_->dir() + "/convnet.pt";
  const std::string export_cmd = "/usr/bin/python3 " +
                                 std::string(TRAINCTL_SOURCE_DIR) +
                                 "/examples/export_torchscript.py " + model +
                                 " > " + cluster_->dir() + "/export.log 2>&1";
  ASSERT_EQ(std::system(export_cmd.c_str()), 0)
      << "examples/export_torchscript.py failed (needs Debian's python3-torch)";
  const std::string spec = cluster_->WriteFile(
      "ts.yaml",
      "name: torchscript\nranks: 2\nseed: 2\n"
      "model: {type: torchscript, path: " + model + "}\n"
      + FashionMnistData(4096) +
      "optimizer: {type: adamw, lr: 0.003}\n"
      "training: {epochs: 1, batch_size: 64, log_every_steps: 16}\n");
  CliResult submit = cluster_->Cli({"submit", spec, "--follow"});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  v1::Job job = cluster_->GetJob(JobIdFrom(submit.output));
  EXPECT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_GT(job.latest_eval().values().at("eval_accuracy"), 0.6);
}

TEST_F(ServiceTrainingTest, CharacterGptLearnsWithEveryLoopFeature) {
  // Fortune cookies as bytes; accumulation, clipping, bf16, checkpointing
  // and mid-epoch evaluation all at once.
  const std::string spec = cluster_->WriteFile(
      "gpt.yaml",
      "name: tiny-gpt\nranks: 2\nseed: 4\n"
      "model: {type: gpt, d_model: 64, n_layers: 2, n_heads: 4, max_seq_len: 32}\n"
      "data: {format: text, train_path: /usr/share/games/fortunes/cookie,"
      " seq_len: 32, train_limit: 2048, eval_fraction: 0.1}\n"
      "optimizer: {type: adamw, lr: 0.003}\n"
      "scheduler: {type: cosine, warmup_steps: 10}\n"
      "training: {epochs: 3, batch_size: 32, grad_accum_steps: 2,"
      " max_grad_norm: 1.0, precision: bf16, gradient_checkpointing: true,"
      " eval_every_steps: 20, log_every_steps: 10}\n");
  CliResult submit = cluster_->Cli({"submit", spec, "--follow"});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const std::string id = JobIdFrom(submit.output);
  v1::Job job = cluster_->GetJob(id);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.reason();
  EXPECT_EQ(job.total_steps(), 3 * ((2048 - 205) / 64));
  std::vector<double> eval_losses;
  for (const v1::JobEvent& e : cluster_->Events(id)) {
    if (!e.has_metric()) continue;
    const auto& v = e.metric().values();
    if (e.metric().kind() == "eval") eval_losses.push_back(v.at("eval_loss"));
    if (e.metric().kind() == "train") {
      EXPECT_GT(v.at("tokens_per_sec"), 0);
      EXPECT_GE(v.at("grad_norm"), 0);
      EXPECT_GE(v.at("compute_ms"), 0);
    }
  }
  ASSERT_GE(eval_losses.size(), 4u);  // every 20 steps plus 3 epoch ends
  // Uniform over 256 bytes is ln 256 = 5.55 nats; it must learn well past it.
  EXPECT_LT(eval_losses.back(), 3.2);
  EXPECT_LT(eval_losses.back(), eval_losses.front());
}

// The rank process writes <dir>/<job id>/events.out.tfevents.<s>.<host>,
// holding exactly the train and eval values the job's events carry.
TEST_F(ServiceTrainingTest, TheEventFileMatchesTheJobsMetrics) {
  const std::string tb = cluster_->dir() + "/tensorboard";
  const std::string data = "/usr/share/datasets/fashion-mnist/";
  const std::string spec = cluster_->WriteFile(
      "tb.yaml",
      "name: tb\nranks: 2\nseed: 6\nmodel: {type: mlp, hidden: [32]}\n"
      "data:\n  train_images: " + data + "train-images-idx3-ubyte.gz\n"
      "  train_labels: " + data + "train-labels-idx1-ubyte.gz\n"
      "  train_limit: 1280\n  eval_fraction: 0.2\n"
      "training: {batch_size: 64, max_steps: 12, log_every_steps: 4}\n"
      "tensorboard: {dir: " + tb + "}\n");
  CliResult submit = cluster_->Cli({"submit", spec, "--follow"});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const std::string id = JobIdFrom(submit.output);
  // (tag, step) -> value, as the job reported it.
  std::map<std::pair<std::string, int64_t>, float> reported;
  for (const v1::JobEvent& e : cluster_->Events(id)) {
    const auto& m = e.metric();
    if (!e.has_metric() || (m.kind() != "train" && m.kind() != "eval")) continue;
    for (const auto& [key, value] : m.values()) {
      reported[{m.kind() + "/" + key, m.step()}] = static_cast<float>(value);
    }
  }
  ASSERT_GT(reported.count({"train/loss_max", 12}), 0u);
  ASSERT_GT(reported.count({"eval/eval_accuracy", 12}), 0u);
  std::vector<std::string> files;
  if (DIR* d = opendir((tb + "/" + id).c_str())) {
    while (dirent* e = readdir(d)) {
      if (e->d_name[0] != '.') files.push_back(tb + "/" + id + "/" + e->d_name);
    }
    closedir(d);
  }
  ASSERT_EQ(files.size(), 1u);
  EXPECT_THAT(files[0], ::testing::MatchesRegex(
                            ".*/events\\.out\\.tfevents\\.[0-9]+\\." +
                            train::HostName()));
  absl::StatusOr<TensorBoardEventFile> file = ReadTensorBoardEventFile(files[0]);
  ASSERT_TRUE(file.ok()) << file.status();
  std::map<std::pair<std::string, int64_t>, float> written;
  for (const auto& s : file->scalars) written[{s.tag, s.step}] = s.value;
  EXPECT_EQ(written, reported);
}

TEST_F(ServiceTrainingTest, DryRunPrintsTheResolvedSpecAndTotalSteps) {
  const std::string path = std::string(TRAINCTL_SOURCE_DIR) +
                           "/examples/fashion-mnist-mlp.yaml";
  CliResult dry = cluster_->Cli({"submit", "--dry-run", path});
  ASSERT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_THAT(dry.output, HasSubstr("\"grad_accum_steps\": 1"));
  EXPECT_THAT(dry.output, HasSubstr("total steps: 936"));  // 2 x 60000 / 128
}

// The plan metric's value of `key` for job `id` (-1 when absent).
double PlanValue(LocalCluster& cluster, const std::string& id,
                 const std::string& key) {
  for (const v1::JobEvent& e : cluster.Events(id)) {
    if (e.has_metric() && e.metric().kind() == "plan") {
      auto it = e.metric().values().find(key);
      return it == e.metric().values().end() ? -1 : it->second;
    }
  }
  return -1;
}

TEST_F(ServiceTrainingTest, WorkersKeepDecodedDataForTheNextJob) {
  // Copies of the test set under new paths: nothing else uses their entries.
  const std::string data = "/usr/share/datasets/fashion-mnist/";
  const std::string images = cluster_->dir() + "/cache-images.gz";
  const std::string labels = cluster_->dir() + "/cache-labels.gz";
  ASSERT_EQ(std::system(("cp " + data + "t10k-images-idx3-ubyte.gz " + images +
                         " && cp " + data + "t10k-labels-idx1-ubyte.gz " + labels)
                            .c_str()),
            0);
  const std::string spec = cluster_->WriteFile(
      "cached.yaml",
      "name: cached\nranks: 2\nseed: 8\nmodel: {type: mlp, hidden: [16]}\n"
      "data: {train_images: " + images + ", train_labels: " + labels + "}\n"
      "training: {batch_size: 64, max_steps: 4}\n");
  CliResult first = cluster_->Cli({"submit", spec, "--follow"});
  ASSERT_EQ(first.exit_code, 0) << first.output;
  const std::string first_id = JobIdFrom(first.output);
  EXPECT_EQ(PlanValue(*cluster_, first_id, "data_cache_stored"), 2);
  EXPECT_EQ(PlanValue(*cluster_, first_id, "data_cache_hits"), 0);
  // Each worker keeps the copies in its state directory, decoded.
  for (const char* worker : {"w1", "w2"}) {
    const std::string cache = cluster_->dir() + "/" + worker + "-state/data-cache";
    const std::string cmd =
        "cmp -s <(gzip -dc " + images + ") " + cache + "/*-cache-images";
    EXPECT_EQ(std::system(("bash -c '" + cmd + "'").c_str()), 0) << cache;
  }
  CliResult second = cluster_->Cli({"submit", spec, "--follow"});
  ASSERT_EQ(second.exit_code, 0) << second.output;
  const std::string second_id = JobIdFrom(second.output);
  EXPECT_EQ(PlanValue(*cluster_, second_id, "data_cache_hits"), 2);
  EXPECT_EQ(PlanValue(*cluster_, second_id, "data_cache_stored"), 0);
  // Same data, same losses: the copy is the file.
  EXPECT_EQ(cluster_->GetJob(first_id).latest_train().values().at("loss"),
            cluster_->GetJob(second_id).latest_train().values().at("loss"));
}

}  // namespace
}  // namespace trainctl::testing
