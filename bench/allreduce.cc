// Gradient-sync bus bandwidth: trainctl's bucketed path (GradientBuckets,
// launched from autograd hooks during a backward) against a raw c10d Gloo
// all-reduce of the same bytes in the same run, and against a plain memory
// copy of those bytes (the physical reference on one machine). Ranks are
// threads joined over loopback, as in c10d's own Gloo tests.
//
//   bench_allreduce [--mb 100] [--ranks 2] [--repeats 5]
//
// Bus bandwidth = bytes x 2(n-1)/n / time (what each rank must move in a
// ring all-reduce); the memory copy moves the bytes once.

#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <vector>

#include "bench/rank_malloc.h"
#include "worker/train/collective_group.h"
#include "worker/train/grad_buckets.h"

namespace {

using Clock = std::chrono::steady_clock;
using trainctl::train::GroupOptions;
using trainctl::train::GroupPtr;
using trainctl::train::MakeGlooGroup;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct RankTimes {
  std::vector<double> raw, bucketed;
};

RankTimes RunRank(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                  int world, int64_t elements, int repeats) {
  GroupOptions options;
  options.gloo_threads = 2;  // Gloo's default
  GroupPtr group = MakeGlooGroup(store, rank, world, options);
  RankTimes times;
  // Raw: one flat tensor, one collective.
  torch::Tensor flat = torch::ones({elements});
  for (int i = 0; i < repeats + 1; ++i) {
    std::vector<torch::Tensor> t{flat};
    group->barrier()->wait();
    const auto start = Clock::now();
    group->allreduce(t)->wait();
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    if (i > 0) times.raw.push_back(s);  // the first run warms the pairs up
  }
  // Bucketed: the same bytes as 40 parameters, reduced from a backward.
  std::vector<torch::Tensor> params;
  const int64_t per_param = elements / 40;
  for (int i = 0; i < 40; ++i) {
    params.push_back(torch::zeros({per_param}, torch::requires_grad()));
  }
  trainctl::train::GradientBuckets buckets(params, group, world, 25 << 20);
  for (int i = 0; i < repeats + 1; ++i) {
    buckets.ZeroGrad();
    torch::Tensor loss = torch::zeros({});
    for (const auto& p : params) loss = loss + p.sum();
    group->barrier()->wait();
    const auto start = Clock::now();
    buckets.SetSyncing(true);
    buckets.SetLoss(torch::ones({1}));
    loss.backward();
    buckets.Finish();
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    if (i > 0) times.bucketed.push_back(s);
  }
  return times;
}

}  // namespace

int main(int argc, char** argv) {
  trainctl::bench::UseRankMallocSettings(argv);  // as in a rank process
  int64_t mb = 100;
  int ranks = 2, repeats = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--mb")) mb = atoll(argv[i + 1]);
    if (!strcmp(argv[i], "--ranks")) ranks = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--repeats")) repeats = atoi(argv[i + 1]);
  }
  at::set_num_threads(1);
  const int64_t elements = mb * (1 << 20) / 4;
  const double bytes = elements * 4.0;

  // Memory copy of the same bytes.
  std::vector<char> src(static_cast<size_t>(bytes), 1), dst(src.size());
  std::vector<double> copies;
  for (int i = 0; i < repeats + 1; ++i) {
    const auto start = Clock::now();
    std::memcpy(dst.data(), src.data(), src.size());
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    if (i > 0) copies.push_back(s);
  }

  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::future<RankTimes>> futures;
  for (int r = 0; r < ranks; ++r) {
    futures.push_back(std::async(std::launch::async, RunRank, store, r, ranks,
                                 elements, repeats));
  }
  std::vector<RankTimes> all;
  for (auto& f : futures) all.push_back(f.get());
  const double raw = Median(all[0].raw);
  const double bucketed = Median(all[0].bucketed);
  const double copy = Median(copies);
  const double bus = bytes * 2.0 * (ranks - 1) / ranks;
  printf("all-reduce of %lld MB, %d ranks (threads, Gloo over loopback), "
         "median of %d\n", static_cast<long long>(mb), ranks, repeats);
  printf("%-34s %10s %12s\n", "path", "seconds", "GB/s");
  printf("%-34s %10.4f %12.2f\n", "memory copy (reference)", copy,
         bytes / copy / 1e9);
  printf("%-34s %10.4f %12.2f\n", "raw c10d Gloo all-reduce", raw,
         bus / raw / 1e9);
  printf("%-34s %10.4f %12.2f\n", "trainctl bucketed (from backward)",
         bucketed, bus / bucketed / 1e9);
  printf("ratio bucketed / raw Gloo bandwidth: %.3f (target >= 0.9)\n",
         raw / bucketed);
  return 0;
}
