// One scheduling pass at the scale of issue 17's target: 10,000 queued jobs
// over 1,000 simulated workers of 8 slots, most of them busy with 200
// running jobs, five priority classes, 50 users with usage and quotas.
// Prints the median, min and max of the pass over --passes runs against
// the 50 ms target. There is no peer: no scheduler a Debian machine can
// install takes this input (Slurm's backfill runs inside slurmctld).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "coordinator/scheduler.h"

using trainctl::coordinator::PendingJob;
using trainctl::coordinator::RunningJob;
using trainctl::coordinator::Schedule;
using trainctl::coordinator::ScheduleResult;
using trainctl::coordinator::SchedulingInput;

namespace {

SchedulingInput Build(int workers, int queued, int running, uint32_t seed) {
  std::mt19937 rng(seed);
  SchedulingInput in;
  in.now_unix_ms = 1'000'000;
  // Running jobs hold all but ~3% of the slots, spread over the workers.
  const int slots = workers * 8;
  const int busy = slots - slots / 32;
  std::vector<int> busy_on(workers, 0);
  for (int i = 0; i < busy; ++i) ++busy_on[i % workers];
  for (int w = 0; w < workers; ++w) {
    in.workers.push_back({"node-" + std::to_string(w), 8 - std::min(8, busy_on[w]), 8});
  }
  for (int r = 0; r < running; ++r) {
    RunningJob job;
    job.id = "run-" + std::to_string(r);
    job.slots = busy / running;
    job.priority = static_cast<int>(rng() % 5) * 100;
    job.user = "user-" + std::to_string(rng() % 50);
    job.eta_unix_ms = in.now_unix_ms + static_cast<int64_t>(rng() % 3'600'000);
    job.grace_ms = 60'000;
    in.running.push_back(job);
  }
  for (int q = 0; q < queued; ++q) {
    PendingJob job;
    job.id = "job-" + std::to_string(q);
    job.ranks = 1 << (rng() % 6);  // 1 to 32 ranks
    job.priority = static_cast<int>(rng() % 5) * 100;
    job.user = "user-" + std::to_string(rng() % 50);
    in.pending.push_back(job);
  }
  for (int u = 0; u < 50; ++u) {
    const std::string user = "user-" + std::to_string(u);
    in.usage[user] = static_cast<double>(rng() % 1000);
    in.group_of_user[user] = "team-" + std::to_string(u % 5);
  }
  in.user_quotas["*"] = {512, -1, true};
  for (int g = 0; g < 5; ++g) in.group_quotas["team-" + std::to_string(g)] = {2048, -1, true};
  return in;
}

}  // namespace

int main(int argc, char** argv) {
  const int passes = argc > 1 ? std::max(1, std::atoi(argv[1])) : 21;
  const SchedulingInput in = Build(1000, 10'000, 200, 17);
  std::vector<double> ms;
  ScheduleResult last;
  for (int i = 0; i < passes; ++i) {
    const auto start = std::chrono::steady_clock::now();
    last = Schedule(in);
    ms.push_back(std::chrono::duration<double, std::milli>(
                     std::chrono::steady_clock::now() - start)
                     .count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("scheduling pass: 10000 queued jobs, 1000 workers x 8 slots, 200 running\n");
  std::printf("  started %zu, preempted %zu, waiting %zu\n", last.placements.size(),
              last.preemptions.size(), last.waiting.size());
  std::printf("  %d passes: median %.2f ms, min %.2f ms, max %.2f ms (target < 50 ms: %s)\n",
              passes, ms[ms.size() / 2], ms.front(), ms.back(),
              ms[ms.size() / 2] < 50 ? "met" : "NOT met");
  return 0;
}
