#pragma once

// The agent under test (agent_test, agent_regroup_test): a fake
// coordinator and fake ranks, and the messages the tests send it.

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tests/unit/agent_fakes.h"
#include "worker/agent/agent.h"

namespace trainctl::agent {

using testing::FakeCoordinator;
using testing::FakeRank;
using testing::FakeRanks;
using testing::FakeSession;

inline v1::CoordinatorMessage Assign(const std::string& job, int generation,
                              std::vector<int> ranks, int world_size,
                              bool gpu = false) {
  v1::CoordinatorMessage message;
  v1::AssignRanks* assign = message.mutable_assign();
  assign->mutable_spec()->set_name("spec-of-" + job);
  int local = 0;
  for (int rank : ranks) {
    v1::RankAssignment* a = assign->add_ranks();
    a->set_job_id(job);
    a->set_generation(generation);
    a->set_rank(rank);
    a->set_world_size(world_size);
    a->set_local_rank(local++);
    a->set_local_world_size(static_cast<int>(ranks.size()));
    a->set_rendezvous_key("key-" + job);
    a->set_gpu(gpu);
  }
  return message;
}

inline v1::CoordinatorMessage Cancel(const std::string& job, int generation) {
  v1::CoordinatorMessage message;
  message.mutable_cancel()->set_job_id(job);
  message.mutable_cancel()->set_generation(generation);
  message.mutable_cancel()->set_reason("cancelled by the test");
  return message;
}

inline v1::RankCursor Cursor(const std::string& job, int generation, int rank,
                      int64_t last_seq) {
  v1::RankCursor cursor;
  cursor.set_job_id(job);
  cursor.set_generation(generation);
  cursor.set_rank(rank);
  cursor.set_last_seq(last_seq);
  return cursor;
}

class AgentTest : public ::testing::Test {
 protected:
  static AgentOptions Options() {
    AgentOptions options;
    options.coordinator = "head:7070";
    options.name = "node-a";
    options.slots = 2;
    options.collective_host = "10.0.0.7";
    options.rank_program = "/nonexistent/trainctl-worker";
    options.standby_ranks = false;
    return options;
  }

  void Start(AgentOptions options = Options()) {
    AgentDeps deps;
    deps.coordinator = coordinator_.Connection();
    deps.start_rank = ranks_.Starter();
    deps.clock = &clock_;
    agent_ = std::make_unique<Agent>(std::move(options), std::move(deps));
    runner_ = std::thread([this] { agent_->Run(); });
  }

  void TearDown() override {
    if (agent_ == nullptr) return;
    agent_->Stop();
    runner_.join();
  }

  // Registers, assigns rank 0 of a one-rank job, and reads its start.
  std::shared_ptr<FakeRank> StartOneRank(FakeSession& session,
                                         const std::string& job) {
    const size_t before = ranks_.count();
    session.Send(Assign(job, 1, {0}, 1));
    std::shared_ptr<FakeRank> rank = ranks_.Started(before);
    std::optional<v1::AgentMessage> started = session.NextNotHeartbeat();
    EXPECT_TRUE(started && started->has_rank_status() &&
                started->rank_status().running() &&
                started->rank_status().job_id() == job);
    return rank;
  }

  // Starts the agent, registers it (heartbeats every `interval_ms`) and
  // starts rank 0 of a one-rank job-1: session_ and rank_.
  void StartWithOneRank(int64_t heartbeat_interval_ms = 3'600'000) {
    Start();
    session_ = coordinator_.AcceptAndRegister(nullptr, {}, heartbeat_interval_ms);
    ASSERT_NE(session_, nullptr);
    rank_ = StartOneRank(*session_, "job-1");
    ASSERT_NE(rank_, nullptr);
  }

  FakeClock clock_;
  FakeCoordinator coordinator_;
  FakeRanks ranks_;
  std::unique_ptr<Agent> agent_;
  std::thread runner_;
  std::shared_ptr<FakeSession> session_;
  std::shared_ptr<FakeRank> rank_;
};


}  // namespace trainctl::agent
