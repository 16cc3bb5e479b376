#pragma once

// JobCore under test, as tables: inputs with their times in, effects out,
// described as words a table can state. No clock, store, hub or link
// fakes: the core does no I/O. Shared by job_core_test and
// job_core_rules_test.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "common/checkpoint_name.h"
#include "common/spec.h"
#include "coordinator/core/job_core.h"

namespace trainctl::coordinator {

constexpr int64_t kLeaseMs = 10'000;
constexpr int64_t kStart = 1'000'000;

// A two-rank CPU job on one slot per worker; `fault_tolerance` and
// `checkpoint` as YAML flow maps ("" for none).
inline std::string TwoRankSpec(const std::string& fault_tolerance,
                        const std::string& checkpoint = "") {
  std::string spec =
      "name: t\nranks: 2\nmodel: mlp\n"
      "data: {train_images: a, train_labels: b}\n"
      "training: {batch_size: 16}\n";
  if (!fault_tolerance.empty())
    spec += "fault_tolerance: " + fault_tolerance + "\n";
  if (!checkpoint.empty()) spec += "checkpoint: " + checkpoint + "\n";
  return spec;
}

// What a list of changes holds, as words a table can state.
inline std::vector<std::string> Describe(const std::vector<Change>& changes) {
  std::vector<std::string> out;
  for (const Change& change : changes) {
    std::visit(
        [&out](const auto& c) {
          using T = std::decay_t<decltype(c)>;
          if constexpr (std::is_same_v<T, SaveJobs>) {
            out.push_back(c.durability == Durability::kImmediate
                              ? "save now"
                              : "save grouped");
          } else if constexpr (std::is_same_v<T, DeleteJobRecords>) {
            out.push_back("delete " + c.job_id);
          } else if constexpr (std::is_same_v<T, CatalogPut>) {
            out.push_back("catalog " + c.record.job_id + ":" +
                          std::to_string(c.record.step));
          } else if constexpr (std::is_same_v<T, CatalogDelete>) {
            out.push_back("uncatalog " + c.job_id + ":" +
                          std::to_string(c.step));
          } else if constexpr (std::is_same_v<T, EventAppended>) {
            const std::string seq = "event " + std::to_string(c.event.seq());
            if (c.event.has_transition()) {
              out.push_back(seq + " -> " +
                            v1::JobState_Name(c.event.transition().to()));
            } else if (c.event.has_metric()) {
              out.push_back(seq + " metric " + c.event.metric().kind());
            } else {
              out.push_back(seq + " log");
            }
          } else if constexpr (std::is_same_v<T, EventsClosed>) {
            out.push_back("close " + c.job_id);
          } else if constexpr (std::is_same_v<T, EventsForgotten>) {
            out.push_back("forget " + c.job_id);
          } else if constexpr (std::is_same_v<T, GenerationStarted>) {
            out.push_back("open " + c.job_id + " g" +
                          std::to_string(c.generation) + " of " +
                          std::to_string(c.world_size));
          } else if constexpr (std::is_same_v<T, GenerationsEnded>) {
            out.push_back("end " + c.job_id + " g" +
                          std::to_string(c.generation));
          } else if constexpr (std::is_same_v<T, RegroupPosted>) {
            out.push_back("regroup " + c.job_id + " g" +
                          std::to_string(c.from));
          } else {
            out.push_back("drop " + c.job_id);
          }
        },
        change);
  }
  return out;
}

// "worker: cancel|assign|registered|..." for each message, in order.
inline std::vector<std::string> Messages(const Outbox& outbox) {
  std::vector<std::string> out;
  for (const AgentMessage& m : outbox) {
    std::string what = m.message.has_cancel()               ? "cancel"
                       : m.message.has_assign()             ? "assign"
                       : m.message.has_registered()         ? "registered"
                       : m.message.has_delete_checkpoints() ? "prune"
                                                            : "other";
    out.push_back(m.worker + ": " + what);
  }
  return out;
}

// Whether `wanted` appear in `all` in that order (others may come between).
inline bool InOrder(const std::vector<std::string>& all,
             const std::vector<std::string>& wanted) {
  size_t next = 0;
  for (const std::string& item : all) {
    if (next < wanted.size() && item == wanted[next]) ++next;
  }
  return next == wanted.size();
}

class JobCoreTest : public ::testing::Test {
 protected:
  JobCoreTest() : core_(kLeaseMs, 1'000) { core_.SetNow(kStart); }

  void At(int64_t ms_after_start) { core_.SetNow(kStart + ms_after_start); }

  void Register(const std::string& name, int slots = 1) {
    v1::RegisterRequest info;
    info.set_name(name);
    info.set_slots(slots);
    info.set_collective_host(name + ".local");
    ASSERT_TRUE(core_.RegisterWorker(info, nullptr).ok());
  }

  // A worker that registers (again) listing the ranks it still has.
  void RegisterWith(const std::string& name, std::vector<v1::RankStatus> ranks) {
    v1::RegisterRequest info;
    info.set_name(name);
    info.set_slots(1);
    info.set_collective_host(name + ".local");
    for (v1::RankStatus& r : ranks) *info.add_ranks() = std::move(r);
    ASSERT_TRUE(core_.RegisterWorker(info, nullptr).ok());
  }

  // The worker's heartbeat, carrying one rank's progress.
  void Progress(const std::string& worker, const std::string& job, int rank,
                int64_t step, int64_t collective_seq, const std::string& phase) {
    core_.Heartbeat(worker);
    v1::Heartbeat beat;
    v1::RankHeartbeat* r = beat.add_ranks();
    r->set_job_id(job);
    r->set_generation(Job(job).generation());
    r->set_rank(rank);
    r->set_step(step);
    r->set_collective_seq(collective_seq);
    r->set_phase(phase);
    core_.OnProgress(worker, beat);
  }

  // Submits (as the shell does around its durable write) and returns the id.
  std::string Submit(const std::string& spec_text) {
    absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(spec_text);
    EXPECT_TRUE(spec.ok()) << spec.status();
    EXPECT_TRUE(core_.ResolvePriority(&*spec, "").ok());
    v1::Job job;
    *job.mutable_spec() = *spec;
    absl::StatusOr<v1::Job> reserved = core_.Reserve(std::move(job));
    EXPECT_TRUE(reserved.ok()) << reserved.status();
    return core_.Admit(*std::move(reserved)).id();
  }

  void Checkpoint(const std::string& worker, const std::string& job, int gen,
                  int64_t step, int64_t seq) {
    v1::RankCheckpoint c;
    c.set_job_id(job);
    c.set_generation(gen);
    c.set_seq(seq);
    c.mutable_checkpoint()->set_step(step);
    c.mutable_checkpoint()->set_path("/ckpt/" + job + "/" +
                                     CheckpointFileName(step, gen));
    ASSERT_TRUE(core_.OnRankCheckpoint(worker, c).ok());
  }

  // A rank's process started, and its heartbeat shows it in `phase`.
  void Running(const std::string& worker, const std::string& job, int rank,
               const std::string& phase) {
    v1::RankStatus status;
    status.set_job_id(job);
    status.set_generation(1);
    status.set_rank(rank);
    status.set_running(true);
    ASSERT_TRUE(core_.OnRankStatus(worker, status).ok());
    v1::Heartbeat beat;
    v1::RankHeartbeat* r = beat.add_ranks();
    r->set_job_id(job);
    r->set_generation(1);
    r->set_rank(rank);
    r->set_step(12);
    r->set_phase(phase);
    core_.OnProgress(worker, beat);
  }

  // The agent reports that a rank it was told to cancel has exited.
  void Exited(const std::string& worker, const std::string& job, int gen,
              int rank, int exit_code = -9) {
    v1::RankStatus status;
    status.set_job_id(job);
    status.set_generation(gen);
    status.set_rank(rank);
    status.set_exit_code(exit_code);
    ASSERT_TRUE(core_.OnRankStatus(worker, status).ok());
  }

  v1::Job Job(const std::string& id) { return *core_.Get(id); }

  JobCore core_;
};

}  // namespace trainctl::coordinator
