// Where a training step's time goes, for 1 and 2 ranks (processes, as in a
// job, joined by Gloo over loopback through a FileStore) and the mlp and cnn
// models on Fashion-MNIST:
//   1. the trainer's own step split (data wait, compute, exposed
//      communication, optimizer) from its train metrics, and
//   2. for each 2-rank model, the communication that backward hid: the time
//      waited for the all-reduce after backward (exposed) against the time
//      the same buckets take when launched only after backward (total).
//
//   bench_step_breakdown [--steps 200]

#include <sys/wait.h>
#include <unistd.h>
#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "bench/rank_malloc.h"
#include "common/spec.h"
#include "worker/train/collective_group.h"
#include "worker/train/grad_buckets.h"
#include "worker/train/models/model.h"
#include "worker/train/trainer.h"

namespace {

using trainctl::train::GroupOptions;
using trainctl::train::GroupPtr;
using trainctl::train::MakeGlooGroup;
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

GroupPtr Group(const c10::intrusive_ptr<c10d::Store>& store, int rank,
               int world) {
  if (world == 1) return {};
  GroupOptions options;
  options.gloo_threads = 2;  // Gloo's default, as the DDP peer runs it
  return MakeGlooGroup(store, rank, world, options);
}

using RankFn = std::function<std::vector<double>(
    int rank, const c10::intrusive_ptr<c10d::Store>& store)>;

// Runs `fn` in `world` forked processes (each rank in its own process, with
// its own main-thread heap, as in a job) and returns what each returned.
// The parent never touches torch before forking, so no thread pool is
// copied half-alive into a child.
std::vector<std::vector<double>> RunRanks(int world, const RankFn& fn) {
  char dir[] = "/tmp/bench_step_breakdown.XXXXXX";
  if (mkdtemp(dir) == nullptr) {
    perror("mkdtemp");
    exit(1);
  }
  const std::string store_path = std::string(dir) + "/store";
  std::vector<pid_t> pids;
  std::vector<int> pipes;
  for (int r = 0; r < world; ++r) {
    int fds[2];
    if (pipe(fds) != 0) {
      perror("pipe");
      exit(1);
    }
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      at::set_num_threads(1);
      auto store = c10::make_intrusive<c10d::FileStore>(store_path, world);
      const std::vector<double> out = fn(r, store);
      const size_t n = out.size();
      bool ok = write(fds[1], &n, sizeof(n)) == sizeof(n);
      const ssize_t bytes = static_cast<ssize_t>(n * sizeof(double));
      ok = ok && (n == 0 || write(fds[1], out.data(), bytes) == bytes);
      _exit(ok ? 0 : 1);
    }
    close(fds[1]);
    pids.push_back(pid);
    pipes.push_back(fds[0]);
  }
  std::vector<std::vector<double>> results(world);
  for (int r = 0; r < world; ++r) {
    size_t n = 0;
    if (read(pipes[r], &n, sizeof(n)) == sizeof(n)) {
      results[r].resize(n);
      size_t got = 0;
      auto* data = reinterpret_cast<char*>(results[r].data());
      while (got < n * sizeof(double)) {
        const ssize_t k = read(pipes[r], data + got, n * sizeof(double) - got);
        if (k <= 0) break;
        got += static_cast<size_t>(k);
      }
    }
    close(pipes[r]);
    int status = 0;
    waitpid(pids[r], &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      fprintf(stderr, "rank %d failed (status %d)\n", r, status);
      exit(1);
    }
  }
  std::system(("rm -rf " + std::string(dir)).c_str());
  return results;
}

// The step-split keys, in the order StepSplit's ranks return their means.
const std::vector<std::string> kSplitKeys = {
    "data_ms", "compute_ms", "comm_ms", "optimizer_ms", "samples_per_sec",
    "comm_min_ms"};

// Mean of each step-split metric over the train windows after the first,
// as rank 0 reports them (with the other ranks' spread).
std::map<std::string, double> StepSplit(const std::string& model, int world,
                                        int steps) {
  const auto spec = Spec(model, world, steps);
  auto results = RunRanks(world, [&](int r, const auto& store) {
    RankContext ctx;
    ctx.rank = r;
    ctx.world_size = world;
    ctx.group = Group(store, r, world);
    std::map<std::string, double> sums;
    int windows = 0;
    ctx.report = [&](const trainctl::v1::MetricPoint& p) {
      if (p.kind() != "train" || windows++ == 0) return;  // skip warm-up
      for (const auto& k : kSplitKeys) {
        // The rank that waited least after backward: its wait is
        // communication; the rest of the mean is waiting for slower ranks.
        const std::string key = k == "comm_min_ms" ? "comm_ms_min" : k;
        const auto it = p.values().find(key);
        sums[k] += it != p.values().end() ? it->second : p.values().at("comm_ms");
      }
    };
    auto result = trainctl::train::Train(spec, ctx);
    if (!result.ok()) {
      fprintf(stderr, "%s\n", std::string(result.status().message()).c_str());
      _exit(1);
    }
    std::vector<double> means;
    for (const auto& k : kSplitKeys) means.push_back(sums[k] / std::max(1, windows - 1));
    return means;
  });
  std::map<std::string, double> split;
  for (size_t i = 0; i < kSplitKeys.size(); ++i) split[kSplitKeys[i]] = results[0][i];
  return split;
}

// Seconds per step of communication after backward: with the buckets
// launched from backward (overlap, exposed) and launched after it (none,
// total). Per step, the rank that reached the wait last is the one counted:
// the other's wait also holds the time it spent waiting for that rank's
// backward, which is skew between ranks on a shared machine, not
// communication.
std::pair<double, double> ExposedAndTotal(const std::string& model, int steps) {
  const auto spec = Spec(model, 2, steps);
  auto waits = RunRanks(2, [&](int r, const auto& store) {
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
    std::vector<double> out;  // per step: overlapped first, then not
    for (int i = 0; i < 2 * steps; ++i) {
      const bool overlap = i < steps;
      buckets.ZeroGrad();
      auto loss = torch::nn::functional::cross_entropy(net->Forward(x), y);
      buckets.SetSyncing(overlap);
      buckets.SetLoss(loss.detach().reshape({1}));
      loss.backward();
      if (!overlap) buckets.SetSyncing(true);  // launch everything now
      const auto wait_start = std::chrono::steady_clock::now();
      buckets.Finish();
      out.push_back(std::chrono::duration<double>(
                        std::chrono::steady_clock::now() - wait_start)
                        .count());
    }
    return out;
  });
  double exposed = 0, total = 0;
  for (int i = 0; i < 2 * steps; ++i) {
    if (i % steps == 0) continue;  // warm-up step of each half
    (i < steps ? exposed : total) += std::min(waits[0][i], waits[1][i]);
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
  // No torch call here: the ranks are forked from this process.
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
