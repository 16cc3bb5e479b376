#pragma once

// The fault-tolerance tests' spec and helpers on top of the JobManager
// fixture: checkpoint reports and rank progress from fake agents.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tests/unit/job_manager_fixture.h"

namespace trainctl::coordinator {

// ranks R, global batch `batch`, checkpoints under /ckpt, and `extra` YAML.
inline std::string FaultSpec(int ranks, int batch, const std::string& extra,
                             const std::string& checkpoint =
                                 "{dir: /ckpt, every_steps: 10}") {
  return "name: ft\nranks: " + std::to_string(ranks) +
         "\nmodel: mlp\ndata: {train_images: a, train_labels: b}\n"
         "training: {batch_size: " + std::to_string(batch) + "}\n" +
         "checkpoint: " + checkpoint + "\n" + extra;
}

// A 2-rank job of the policy class `high` (for tests of what waits for
// slots behind or ahead of running jobs).
inline constexpr char kHighPriorityJob[] =
    "name: h\nranks: 2\nmodel: mlp\ndata: {train_images: a, train_labels: b}\n"
    "training: {batch_size: 8}\npriority: high\n";

class JobManagerFaultsTest : public JobManagerTest {
 protected:
  void Checkpoint(const std::string& worker, const std::string& job, int gen,
                  int64_t step, std::map<std::string, double> metrics = {}) {
    v1::RankCheckpoint c;
    c.set_job_id(job);
    c.set_generation(gen);
    c.mutable_checkpoint()->set_step(step);
    c.mutable_checkpoint()->set_path("/ckpt/" + job + "/step-" +
                                     std::to_string(step) + ".ckpt");
    c.mutable_checkpoint()->set_world_size(2);
    for (const auto& [k, v] : metrics) {
      (*c.mutable_checkpoint()->mutable_metrics())[k] = v;
    }
    ASSERT_TRUE(jobs_.OnRankCheckpoint(worker, c).ok());
  }

  void Progress(const std::string& worker, const std::string& job, int rank,
                int64_t step, int64_t seq, const std::string& phase) {
    v1::Heartbeat beat;
    v1::RankHeartbeat* r = beat.add_ranks();
    r->set_job_id(job);
    r->set_generation(1);
    r->set_rank(rank);
    r->set_step(step);
    r->set_collective_seq(seq);
    r->set_phase(phase);
    jobs_.Heartbeat(worker);
    jobs_.OnProgress(worker, beat);
  }

  // Rank r of `job`'s generation 1 reports from workers[r] that it runs,
  // then its progress at step 12 (in its group, past its start) in
  // phases[r] ("compute" when not given).
  void RunRanks(const std::string& job, const std::vector<std::string>& workers,
                const std::map<int, std::string>& phases = {}) {
    for (int r = 0; r < static_cast<int>(workers.size()); ++r) {
      v1::RankStatus running;
      running.set_job_id(job);
      running.set_generation(1);
      running.set_rank(r);
      running.set_running(true);
      running.set_pid(100 + r);
      EXPECT_TRUE(jobs_.OnRankStatus(workers[r], running).ok());
      auto phase = phases.find(r);
      Progress(workers[r], job, r, 12, 40, phase == phases.end() ? "compute" : phase->second);
    }
  }
};

}  // namespace trainctl::coordinator
