#pragma once

// The JobManager under test with fakes for clock, store and agent links;
// shared by job_manager_test and job_manager_faults_test.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "coordinator/job_manager.h"
#include "coordinator/job_store.h"

namespace trainctl::coordinator {

// Records what the coordinator sends down to one agent.
class FakeAgentLink : public AgentLink {
 public:
  bool Send(const v1::CoordinatorMessage& m) override {
    sent.push_back(m);
    return true;
  }
  void Disconnect() override { disconnected = true; }
  std::vector<v1::CoordinatorMessage> sent;
  bool disconnected = false;

  std::vector<v1::RankAssignment> Assignments() const {
    std::vector<v1::RankAssignment> out;
    for (const auto& m : sent) {
      for (v1::RankAssignment a : m.assign().ranks()) {
        EXPECT_FALSE(a.has_spec()) << "the spec is sent once per worker";
        *a.mutable_spec() = m.assign().spec();  // as the agent does
        out.push_back(std::move(a));
      }
    }
    return out;
  }
  int Cancels() const {
    int n = 0;
    for (const auto& m : sent) n += m.has_cancel();
    return n;
  }
};

// A valid spec; without `extra` a failed generation fails the job (no
// restarts), which the basic lifecycle tests rely on.
inline std::string Spec(int ranks,
                        const std::string& extra =
                            "fault_tolerance: {max_restarts: 0}\n") {
  return "name: t\nranks: " + std::to_string(ranks) +
         "\nmodel: mlp\ndata: {train_images: a, train_labels: b}\n"
         "training: {batch_size: " +
         std::to_string(ranks * 8) + "}\n" + extra;
}

// A scheduling policy from its YAML (a test's own, known to be valid).
inline SchedulingConfig TestPolicy(const std::string& yaml) {
  absl::StatusOr<SchedulingConfig> config = ParseSchedulingConfig(yaml, "test.yaml");
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : DefaultSchedulingConfig();
}

// `user`'s decayed slot-hours in `jobs`' queue, or -1 when it lists none.
inline double UsageSlotHours(JobManager& jobs, const std::string& user) {
  const v1::GetQueueResponse queue = jobs.Queue();
  for (const v1::UserStanding& u : queue.users()) {
    if (u.user() == user) return u.usage_slot_hours();
  }
  return -1;
}

class JobManagerTest : public ::testing::Test {
 protected:
  JobManagerTest()
      : jobs_(clock_, events_, rendezvous_, store_, 5'000, 1'000) {}

  std::shared_ptr<FakeAgentLink> AddWorker(const std::string& name, int slots) {
    auto link = std::make_shared<FakeAgentLink>();
    v1::RegisterRequest reg;
    reg.set_name(name);
    reg.set_slots(slots);
    reg.set_collective_host("127.0.0.1");
    EXPECT_TRUE(jobs_.RegisterWorker(reg, link).ok());
    return link;
  }

  void Exit(const std::string& worker, const std::string& job, int rank,
            int code, const std::string& message = "", int generation = 1) {
    v1::RankStatus s;
    s.set_job_id(job);
    s.set_generation(generation);
    s.set_rank(rank);
    s.set_running(false);
    s.set_exit_code(code);
    s.set_message(message);
    ASSERT_TRUE(jobs_.OnRankStatus(worker, s).ok());
  }

  std::vector<v1::JobEvent> Events(const std::string& job) {
    bool closed = false;
    return *events_.WaitForEvents(job, 1, 0, &closed);
  }

  FakeClock clock_;
  EventHub events_;
  Rendezvous rendezvous_;
  InMemoryJobStore store_;
  JobManager jobs_;
};

}  // namespace trainctl::coordinator
