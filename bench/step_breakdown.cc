// Where a training step's time goes, for 1 and 2 ranks (threads joined by
// Gloo over loopback) and the mlp and cnn models on Fashion-MNIST:
//   1. the trainer's own step split (data wait, compute, exposed
//      communication, optimizer) from its train metrics, and
//   2. for each 2-rank model, the communication that backward hid: the time
//      waited for the all-reduce after backward (exposed) against the time
//      the same buckets take when launched only after backward (total).
//
//   bench_step_breakdown [--steps 200]

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <string>

#include "common/spec.h"
#include "worker/train/grad_buckets.h"
#include "bench/rank_malloc.h"
#include "worker/train/models/model.h"
#include "worker/train/trainer.h"

namespace {

using trainctl::train::RankContext;

constexpr char kData[] = "/usr/share/datasets/fashion-mnist/";

trainctl::v1::JobSpec Spec(const std::string& model, int ranks, int steps) {
  auto spec = trainctl::ParseJobSpec(
      "ranks: " + std::to_string(ranks) + "\nmodel: " + model +
      "\ndata: {train_images: " + kData + "train-images-idx3-ubyte.gz,"
      " train_labels: " + kData + "train-labels-idx1-ubyte.gz}\n"
      "optimizer: {type: adamw, lr: 0.001}\n"
      "training: {batch_size: 128, max_steps: " + std::to_string(steps) +
      ", log_every_steps: 20, threads_per_rank: 1}\n");
  if (!spec.ok()) {
    fprintf(stderr, "%s\n", std::string(spec.status().message()).c_str());
    exit(1);
  }
  return *spec;
}

c10::intrusive_ptr<c10d::ProcessGroup> Group(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world) {
  if (world == 1) return {};
  auto options = c10d::ProcessGroupGloo::Options::create();
  options->devices.push_back(
      c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, options);
}

// Mean of each step-split metric over the train windows after the first.
std::map<std::string, double> StepSplit(const std::string& model, int world,
                                        int steps) {
  const auto spec = Spec(model, world, steps);
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::mutex mu;
  std::map<std::string, double> sums;
  int windows = 0;
  std::vector<std::future<void>> ranks;
  for (int r = 0; r < world; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r] {
      RankContext ctx;
      ctx.rank = r;
      ctx.world_size = world;
      ctx.group = Group(store, r, world);
      int seen = 0;
      ctx.report = [&](const trainctl::v1::MetricPoint& p) {
        if (p.kind() != "train" || seen++ == 0) return;  // skip warm-up
        std::lock_guard<std::mutex> lock(mu);
        for (const char* k : {"data_ms", "compute_ms", "comm_ms",
                              "optimizer_ms", "samples_per_sec"}) {
          sums[k] += p.values().at(k);
        }
        // The rank that waited least after backward: its wait is
        // communication; the rest of the mean is waiting for slower ranks.
        const auto min = p.values().find("comm_ms_min");
        sums["comm_min_ms"] +=
            min == p.values().end() ? p.values().at("comm_ms") : min->second;
        ++windows;
      };
      auto result = trainctl::train::Train(spec, ctx);
      if (!result.ok()) {
        fprintf(stderr, "%s\n", std::string(result.status().message()).c_str());
        exit(1);
      }
    }));
  }
  for (auto& f : ranks) f.get();
  for (auto& [k, v] : sums) v /= std::max(1, windows);
  return sums;
}

// Seconds per step of communication after backward: with the buckets
// launched from backward (overlap, exposed) and launched after it (none,
// total). Per step, the rank that reached the wait last is the one counted:
// the other's wait also holds the time it spent waiting for that rank's
// backward, which is skew between ranks on a shared machine, not
// communication.
std::pair<double, double> ExposedAndTotal(const std::string& model, int steps) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::future<std::vector<double>>> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r] {
      const auto spec = Spec(model, 2, steps);
      trainctl::train::DataInfo info;
      info.input_shape = {1, 28, 28};
      info.num_classes = 10;
      torch::manual_seed(1);
      auto built = trainctl::train::BuildModel(spec, info);
      auto& net = *built;
      auto group = Group(store, r, 2);
      trainctl::train::GradientBuckets buckets(net->Parameters(), group, 2,
                                               25 << 20);
      torch::Tensor x = torch::rand({64, 1, 28, 28});
      torch::Tensor y = torch::randint(10, {64});
      std::vector<double> waits;  // per step: overlapped first, then not
      for (int i = 0; i < 2 * steps; ++i) {
        const bool overlap = i < steps;
        buckets.ZeroGrad();
        auto loss = torch::nn::functional::cross_entropy(net->Forward(x), y);
        buckets.SetSyncing(overlap);
        buckets.SetLoss(loss.item<double>());
        loss.backward();
        if (!overlap) buckets.SetSyncing(true);  // launch everything now
        double waited = 0;
        buckets.Finish(&waited);
        waits.push_back(waited);
      }
      return waits;
    }));
  }
  const std::vector<double> a = ranks[0].get(), b = ranks[1].get();
  double exposed = 0, total = 0;
  for (int i = 0; i < 2 * steps; ++i) {
    if (i % steps == 0) continue;  // warm-up step of each half
    (i < steps ? exposed : total) += std::min(a[i], b[i]);
  }
  return {exposed / (steps - 1), total / (steps - 1)};
}

}  // namespace

int main(int argc, char** argv) {
  trainctl::bench::UseRankMallocSettings(argv);  // as in a rank process
  int steps = 200;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
  }
  at::set_num_threads(1);
  printf("step time split (mean over windows after warm-up), global batch "
         "128, 1 thread per rank; comm = exposed communication (the rank that "
         "waited least), skew = the mean rank's further wait for slower ranks\n");
  printf("%-5s %5s %9s %9s %9s %9s %9s %9s %10s\n", "model", "ranks", "data",
         "compute", "comm", "skew", "optim", "total", "samples/s");
  for (const char* model : {"mlp", "cnn"}) {
    const int model_steps = std::string(model) == "cnn" ? steps / 2 : steps;
    for (int world : {1, 2}) {
      auto s = StepSplit(model, world, model_steps);
      const double total =
          s["data_ms"] + s["compute_ms"] + s["comm_ms"] + s["optimizer_ms"];
      const double skew = s["comm_ms"] - s["comm_min_ms"];
      printf("%-5s %5d %8.2f%% %8.2f%% %8.2f%% %8.2f%% %8.2f%% %7.2fms %10.0f\n",
             model, world, 100 * s["data_ms"] / total,
             100 * s["compute_ms"] / total, 100 * s["comm_min_ms"] / total,
             100 * skew / total, 100 * s["optimizer_ms"] / total, total,
             s["samples_per_sec"]);
    }
  }
  printf("\ncommunication hidden by backward, 2 ranks (per step, the rank "
         "that reached the wait last):\n");
  for (const char* model : {"mlp", "cnn"}) {
    auto [exposed, total] = ExposedAndTotal(model, std::max(20, steps / 4));
    printf("%-5s exposed %.2f ms of %.2f ms total = %.1f%% (target <= 50%% for cnn)\n",
           model, exposed * 1e3, total * 1e3, 100 * exposed / total);
  }
  return 0;
}
