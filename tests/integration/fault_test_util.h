#pragma once

// What the fault-tolerance tests read back from a cluster: the checkpoint
// catalog, restart reasons, and the samples each step trained (from the
// ranks' TRAINCTL_SAMPLE_LOG files), to prove exact-once data.

#include <dirent.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "local_cluster.h"

namespace trainctl::testing {

// The fault tests' job: an mlp on Fashion-MNIST, 2 epochs, checkpoints every
// 20 steps, and the given fault_tolerance section.
constexpr char kData[] = "/usr/share/datasets/fashion-mnist/";
constexpr int kTrainSamples = 9600;
constexpr int kBatch = 96;  // splits evenly over 3 and 2 ranks
constexpr int kStepsPerEpoch = kTrainSamples / kBatch;

inline std::string Spec(int ranks, const std::string& checkpoint_dir,
                 const std::string& fault_tolerance,
                 const std::string& checkpoint_extra = "") {
  return "name: ft\nranks: " + std::to_string(ranks) +
         "\nseed: 7\nmodel: mlp\ndata:\n"
         "  train_images: " + std::string(kData) + "train-images-idx3-ubyte.gz\n"
         "  train_labels: " + std::string(kData) + "train-labels-idx1-ubyte.gz\n"
         "  eval_images: " + std::string(kData) + "t10k-images-idx3-ubyte.gz\n"
         "  eval_labels: " + std::string(kData) + "t10k-labels-idx1-ubyte.gz\n"
         "  train_limit: " + std::to_string(kTrainSamples) + "\n"
         "  eval_limit: 10000\n"
         "optimizer: {type: adamw, lr: 0.002}\n"
         "training: {epochs: 2, batch_size: " + std::to_string(kBatch) +
         ", log_every_steps: 5}\n"
         "checkpoint: {dir: " + checkpoint_dir + ", every_steps: 20" +
         checkpoint_extra + "}\n"
         "fault_tolerance: " + fault_tolerance + "\n";
}

inline double Accuracy(const v1::Job& job) {
  auto it = job.latest_eval().values().find("eval_accuracy");
  return it == job.latest_eval().values().end() ? -1 : it->second;
}

inline std::vector<v1::Checkpoint> Catalog(LocalCluster& cluster,
                                    const std::string& id) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ListCheckpointsRequest req;
  req.set_job_id(id);
  v1::ListCheckpointsResponse resp;
  EXPECT_TRUE(cluster.jobs().ListCheckpoints(&ctx, req, &resp).ok());
  return {resp.checkpoints().begin(), resp.checkpoints().end()};
}

// Polls until the job has trained past `step` with a checkpoint in the
// catalog, the moment the fault tests break something.
inline v1::Job WaitForCheckpointAndStep(LocalCluster& cluster,
                                        const std::string& id, int64_t step,
                                        std::chrono::seconds timeout) {
  return cluster.WaitForJob(
      id,
      [&](const v1::Job& j) {
        return j.latest_train().step() >= step && !Catalog(cluster, id).empty();
      },
      timeout);
}

inline v1::Job WaitUntilFinal(LocalCluster& cluster, const std::string& id) {
  return cluster.WaitForJob(
      id,
      [](const v1::Job& j) {
        return j.state() == v1::JOB_STATE_SUCCEEDED ||
               j.state() == v1::JOB_STATE_FAILED ||
               j.state() == v1::JOB_STATE_CANCELLED;
      },
      std::chrono::seconds(400));
}

// The reasons of the job's transitions into RESTARTING.
inline std::vector<std::string> RestartReasons(const v1::Job& job) {
  std::vector<std::string> out;
  for (const auto& t : job.transitions()) {
    if (t.to() == v1::JOB_STATE_RESTARTING) out.push_back(t.reason());
  }
  return out;
}

// One rank's sample log (TRAINCTL_SAMPLE_LOG): the ids it trained at each
// step, in the generation it ran in.
struct SampleLog {
  int generation = 0;
  int rank = 0;
  std::map<int64_t, std::vector<int64_t>> ids_by_step;
};

inline std::vector<SampleLog> ReadSampleLogs(const std::string& dir, const std::string& job) {
  std::vector<SampleLog> logs;
  DIR* d = opendir(dir.c_str());
  while (const dirent* e = d ? readdir(d) : nullptr) {
    const std::string name = e->d_name;
    SampleLog log;
    if (name.rfind(job + "-g", 0) != 0 ||
        sscanf(name.c_str() + job.size(), "-g%d-r%d", &log.generation, &log.rank) != 2) {
      continue;
    }
    std::ifstream in(dir + "/" + name);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      int64_t step = 0, id = 0;
      fields >> step;
      std::vector<int64_t>& ids = log.ids_by_step[step];
      while (fields >> id) ids.push_back(id);
    }
    logs.push_back(std::move(log));
  }
  if (d) closedir(d);
  return logs;
}

// Sample ids per step from the ranks' sample logs (TRAINCTL_SAMPLE_LOG):
// for each step, the ids of the latest generation that trained it (a
// restart re-trains the steps after its checkpoint; those replace the lost
// ones, exactly like the model state does).
inline std::map<int64_t, std::vector<int64_t>> SamplesByStep(const std::string& dir,
                                                             const std::string& job) {
  std::map<int64_t, std::pair<int, std::vector<int64_t>>> by_step;
  for (const SampleLog& log : ReadSampleLogs(dir, job)) {
    for (const auto& [step, ids] : log.ids_by_step) {
      auto& slot = by_step[step];
      if (log.generation > slot.first) slot = {log.generation, {}};
      if (log.generation == slot.first) {
        slot.second.insert(slot.second.end(), ids.begin(), ids.end());
      }
    }
  }
  std::map<int64_t, std::vector<int64_t>> out;
  for (auto& [step, slot] : by_step) out[step] = slot.second;
  return out;
}

// Every sample of each epoch exactly once, every step complete: `epochs`
// of `steps_per_epoch` steps of `batch` samples, over `samples` samples.
inline void ExpectExactlyOnce(
    const std::map<int64_t, std::vector<int64_t>>& steps, int epochs,
    int steps_per_epoch, int batch, int samples) {
  ASSERT_EQ(steps.size(), static_cast<size_t>(epochs * steps_per_epoch));
  for (int epoch = 0; epoch < epochs; ++epoch) {
    std::map<int64_t, int> seen;
    for (int s = 0; s < steps_per_epoch; ++s) {
      const auto& ids = steps.at(epoch * steps_per_epoch + s);
      EXPECT_EQ(ids.size(), static_cast<size_t>(batch)) << "step " << s;
      for (int64_t id : ids) ++seen[id];
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(samples)) << "epoch " << epoch;
    for (const auto& [id, n] : seen) {
      ASSERT_EQ(n, 1) << "sample " << id << " in epoch " << epoch;
    }
  }
}

// Sets an environment variable for the processes started while it lives.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

}  // namespace trainctl::testing
