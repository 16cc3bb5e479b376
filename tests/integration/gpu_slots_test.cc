// GPU slots end to end, on a node without GPUs: a worker that says it has
// two (--gpus 0,1) registers them, a `device: cuda` job is placed on it and
// nowhere else, its rank is handed one of the GPUs, and, finding none,
// fails the job at once saying why (never a silent CPU run). A job wider
// than the GPU slots waits, saying so.

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "local_cluster.h"

namespace trainctl::testing {
namespace {

using ::testing::HasSubstr;
using std::chrono::seconds;

constexpr char kData[] = "/usr/share/datasets/fashion-mnist/";

std::string CudaJob(int ranks) {
  return std::string("name: on-gpu\nranks: ") + std::to_string(ranks) +
         "\nmodel: mlp\ndata:\n  train_images: " + kData +
         "train-images-idx3-ubyte.gz\n  train_labels: " + kData +
         "train-labels-idx1-ubyte.gz\n  train_limit: 512\n"
         "training: {batch_size: 30, max_steps: 2, device: cuda}\n"
         "fault_tolerance: {max_restarts: 2}\n";
}

TEST(GpuSlotsTest, CudaJobGoesToTheGpuSlotsAndFailsClearlyWithoutAGpu) {
  if (access("/dev/nvidia0", F_OK) == 0) {
    GTEST_SKIP() << "this node has GPUs; tests/gpu covers it";
  }
  LocalCluster cluster(1, 2, 1);  // w1: two CPU slots
  cluster.StartWorker("gpu-node", 2, 1, {"--gpus", "0,1"});
  ASSERT_TRUE(cluster.WaitForWorkers(2, seconds(60)));
  CliResult workers = cluster.Cli({"workers", "--output", "json"});
  ASSERT_EQ(workers.exit_code, 0) << workers.output;
  EXPECT_THAT(workers.output, HasSubstr("\"cuda:0\""));
  EXPECT_THAT(workers.output, HasSubstr("\"cuda:1\""));

  v1::Job job = cluster.Submit(CudaJob(2));
  v1::Job done = cluster.WaitForJob(
      job.id(), [](const v1::Job& j) { return j.state() == v1::JOB_STATE_FAILED ||
                                             j.state() == v1::JOB_STATE_SUCCEEDED; },
      seconds(120));
  ASSERT_EQ(done.state(), v1::JOB_STATE_FAILED) << done.reason();
  EXPECT_EQ(done.restarts(), 0) << "a missing GPU is not retried: " << done.reason();
  ASSERT_EQ(done.ranks_size(), 2);
  for (const v1::RankInfo& rank : done.ranks()) {
    EXPECT_EQ(rank.worker(), "gpu-node");
    EXPECT_TRUE(rank.gpu());
  }
  EXPECT_THAT(done.reason(), HasSubstr("training.device: cuda, but this"));
  // Each rank was handed its own GPU (the CUDA build names it; a CPU-only
  // worker says it was built without CUDA).
  CliResult logs = cluster.Cli({"logs", job.id()});
  EXPECT_TRUE(logs.output.find("CUDA_VISIBLE_DEVICES='0'") != std::string::npos ||
              logs.output.find("built without CUDA") != std::string::npos)
      << logs.output;

  // Both GPU slots are free again; three ranks do not fit on them.
  v1::Job wide = cluster.Submit(CudaJob(3));
  v1::Job waiting = cluster.WaitForJob(
      wide.id(), [](const v1::Job& j) { return !j.pending_reason().empty(); },
      seconds(30));
  EXPECT_EQ(waiting.state(), v1::JOB_STATE_QUEUED);
  EXPECT_EQ(waiting.pending_reason(),
            "needs 3 GPU slots and the cluster has 2 in all; it waits for "
            "more workers and holds up no other job");
  EXPECT_EQ(cluster.Cli({"cancel", wide.id()}).exit_code, 0);
}

}  // namespace
}  // namespace trainctl::testing
