// Sharded token data end to end: a restart from 3 ranks to 2 trains every
// window of every epoch exactly once; nodes that do not hold the same files
// fail the job naming the shard, instead of training on different data.
//
// For the latter, two "nodes" on one machine: worker w2 runs in its own mount namespace,
// where another directory is bind-mounted over the data directory, so both
// see the same paths and w2 sees different bytes at one of them.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "fault_test_util.h"
#include "tests/unit/image_test_util.h"
#include "tests/unit/tar_test_util.h"
#include "local_cluster.h"

namespace trainctl::testing {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;
using trainctl::testing::EncodePng;
using trainctl::testing::Tar;

// `count` uint16 ids, id i = (i * step) % 97.
void WriteTokens(const std::string& path, int count, int step) {
  std::string bytes;
  for (int i = 0; i < count; ++i) {
    const uint16_t id = static_cast<uint16_t>((i * step) % 97);
    bytes.push_back(static_cast<char>(id & 0xff));
    bytes.push_back(static_cast<char>(id >> 8));
  }
  std::ofstream(path, std::ios::binary) << bytes;
}

v1::Job RunToTheEnd(LocalCluster& cluster, const std::string& data) {
  const v1::Job job = cluster.Submit(
      "name: shards\nranks: 2\nseed: 3\n"
      "model: {type: gpt, d_model: 32, n_layers: 1, n_heads: 2, max_seq_len: 16}\n"
      "data: {format: tokens, train_path: " + data + ", seq_len: 16}\n"
      "training: {epochs: 1, batch_size: 8, max_steps: 3, log_every_steps: 1}\n");
  return cluster.WaitForJob(
      job.id(),
      [](const v1::Job& j) {
        return j.state() == v1::JOB_STATE_SUCCEEDED ||
               j.state() == v1::JOB_STATE_FAILED;
      },
      seconds(180));
}

// 3 shards of unequal sizes: 301, 501 and 401 tokens are 75 + 125 + 100
// windows of 4 (+1); a global batch of 12 splits over 3 and 2 ranks.
constexpr int kWindows = 300;
constexpr int kBatch = 12;
constexpr int kStepsPerEpoch = kWindows / kBatch;

TEST(ShardedDataTest, ARestartFromThreeRanksToTwoTrainsEveryWindowOnce) {
  const ScopedTempDir temp("sharded-restart");
  const std::string data = temp.path() + "/tokens";
  std::filesystem::create_directories(data);
  WriteTokens(data + "/shard-0.bin", 301, 3);
  WriteTokens(data + "/shard-1.bin", 501, 5);
  WriteTokens(data + "/shard-2.bin", 401, 7);
  const std::string samples = temp.path() + "/samples";
  const std::string checkpoints = temp.path() + "/ckpt";
  std::filesystem::create_directories(samples);
  std::filesystem::create_directories(checkpoints);
  std::unique_ptr<LocalCluster> cluster;
  {
    ScopedEnv log("TRAINCTL_SAMPLE_LOG", samples);
    // Rank 2 stops at step 30 of the first generation, so that worker w3 is
    // killed mid-epoch whatever the machine's speed.
    ScopedEnv hang("TRAINCTL_FAULT", "hang:rank=2,step=30,generation=1");
    cluster = std::make_unique<LocalCluster>(3, 1, 1);
  }
  const std::string spec =
      "name: shard-restart\nranks: 3\nseed: 5\n"
      "model: {type: gpt, d_model: 32, n_layers: 1, n_heads: 2, max_seq_len: 8}\n"
      "data: {format: tokens, train_path: " + data + ", seq_len: 4}\n"
      "training: {epochs: 2, batch_size: 12, log_every_steps: 5}\n"
      "checkpoint: {dir: " + checkpoints + ", every_steps: 10}\n"
      "fault_tolerance: {min_workers: 2, max_restarts: 1, hang_timeout_s: 600}\n";
  // The dry run counts the windows of all three shards (the data probe).
  const CliResult dry =
      cluster->Cli({"submit", cluster->WriteFile("shards.yaml", spec), "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_THAT(dry.output, HasSubstr("Shard plan:  300 samples per epoch in 25 "
                                    "steps of 12 (4 per rank per micro-step)"));
  v1::Job job = cluster->Submit(spec);
  const v1::Job mid = WaitForCheckpointAndStep(*cluster, job.id(), 25, seconds(120));
  ASSERT_EQ(mid.state(), v1::JOB_STATE_RUNNING);
  cluster->KillWorker(2);

  const v1::Job done = WaitUntilFinal(*cluster, job.id());
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.reason();
  EXPECT_EQ(done.world_size(), 2);
  EXPECT_EQ(done.resume_from().world_size(), 3);
  EXPECT_GT(done.resume_from().step(), 0);
  ExpectExactlyOnce(SamplesByStep(samples, job.id()), 2, kStepsPerEpoch, kBatch,
                    kWindows);
}

// A tar of `count` 8x8 grayscale PNGs: class k's pixels are noise around
// 40 + 85k, so three brightness classes an mlp tells apart.
std::string ImageShard(int count, uint32_t seed) {
  std::vector<std::pair<std::string, std::string>> files;
  uint32_t state = seed;
  for (int i = 0; i < count; ++i) {
    const int label = static_cast<int>((state = state * 1664525u + 1013904223u) >> 30) % 3;
    std::vector<uint8_t> pixels(64);
    for (uint8_t& p : pixels) {
      state = state * 1664525u + 1013904223u;
      p = static_cast<uint8_t>(40 + 85 * label + static_cast<int>(state >> 27) - 16);
    }
    const std::string key = "img" + std::to_string(seed) + "-" + std::to_string(i);
    files.push_back({key + ".png", EncodePng(pixels, 8, 8, 1)});
    files.push_back({key + ".cls", std::to_string(label)});
  }
  return Tar(files);
}

// With the augmentation and normalisation a PyTorch user would write.
TEST(ShardedDataTest, TarShardsOfImagesTrainThroughTheService) {
  const ScopedTempDir temp("webdataset");
  const std::string train = temp.path() + "/train", eval = temp.path() + "/eval.tar";
  std::filesystem::create_directories(train);
  for (uint32_t s = 0; s < 3; ++s) {
    std::ofstream(train + "/shard-" + std::to_string(s) + ".tar", std::ios::binary)
        << ImageShard(200 + 40 * static_cast<int>(s), s + 1);
  }
  std::ofstream(eval, std::ios::binary) << ImageShard(150, 99);
  LocalCluster cluster(2, 1, 1);
  const v1::Job job = cluster.Submit(
      "name: images\nranks: 2\nseed: 4\nmodel: mlp\n"
      "data:\n  format: webdataset\n  train_path: " + train + "\n  eval_path: " + eval +
      "\n  transforms:\n"
      "    normalize: {mean: [0.5], std: [0.25]}\n"
      "    random_crop: {size: [6, 6], padding: 1}\n"
      "    horizontal_flip: true\n"
      "optimizer: {type: adamw, lr: 0.005}\n"
      "training: {epochs: 4, batch_size: 32, log_every_steps: 10}\n");
  const v1::Job done = WaitUntilFinal(cluster, job.id());
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.reason();
  const auto& eval_values = done.latest_eval().values();
  ASSERT_TRUE(eval_values.count("eval_accuracy"));
  std::cout << "eval accuracy on tar shards of images "
            << eval_values.at("eval_accuracy") << std::endl;
  EXPECT_GT(eval_values.at("eval_accuracy"), 0.9);
}

TEST(ShardedDataTest, ANodeHoldingADifferentShardFailsTheJobNamingIt) {
  if (geteuid() != 0) GTEST_SKIP() << "a mount namespace needs root";
  if (std::system("unshare --mount --propagation private true >/dev/null 2>&1") != 0) {
    GTEST_SKIP() << "unshare --mount does not work here";
  }
  const ScopedTempDir temp("sharded-data");
  const std::string data = temp.path() + "/data", other = temp.path() + "/other";
  std::filesystem::create_directories(data);
  std::filesystem::create_directories(other);
  WriteTokens(data + "/a.bin", 2000, 3);
  WriteTokens(data + "/b.bin", 1500, 5);
  WriteTokens(other + "/a.bin", 2000, 3);
  WriteTokens(other + "/b.bin", 1500, 7);  // same size, other ids

  LocalCluster cluster(1, 1, 1);
  cluster.StartWorker(
      "w2", 1, 1, {}, true,
      {"/usr/bin/unshare", "--mount", "--propagation", "private", "--",
       "/bin/sh", "-c", "mount --bind \"$1\" \"$2\" && shift 2 && exec \"$@\"",
       "sh", other, data});
  ASSERT_TRUE(cluster.WaitForWorkers(2, seconds(30)));

  const v1::Job mismatched = RunToTheEnd(cluster, data);
  EXPECT_EQ(mismatched.state(), v1::JOB_STATE_FAILED);
  EXPECT_THAT(mismatched.reason(), HasSubstr("shard " + data + "/b.bin has the same size"));
  EXPECT_THAT(mismatched.reason(), HasSubstr("different contents"));
  EXPECT_THAT(mismatched.reason(), HasSubstr("not retried"));

  // The same files on both nodes: the check passes and the job trains.
  WriteTokens(other + "/b.bin", 1500, 5);
  const v1::Job matched = RunToTheEnd(cluster, data);
  EXPECT_EQ(matched.state(), v1::JOB_STATE_SUCCEEDED) << matched.reason();
}

}  // namespace
}  // namespace trainctl::testing
