// The agent's side of in-place recovery: live rank processes renumbered
// into the next generation (their reports carry the new identity, one
// that died first is reported under it), and a planned regroup that asks
// them to leave their group at their next step boundary.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "tests/unit/agent_test_fixture.h"

namespace trainctl::agent {
namespace {

using ::testing::HasSubstr;

v1::CoordinatorMessage Regroup(const std::string& job, int from, int to, int world_size,
                               std::vector<std::pair<int, int>> moves) {
  v1::CoordinatorMessage message;
  v1::RegroupRanks* regroup = message.mutable_regroup();
  regroup->set_job_id(job);
  regroup->set_from_generation(from);
  regroup->set_generation(to);
  regroup->set_world_size(world_size);
  for (const auto& [from_rank, rank] : moves) {
    v1::RegroupRanks::Move* move = regroup->add_moves();
    move->set_from_rank(from_rank);
    move->set_rank(rank);
  }
  return message;
}

class AgentRegroupTest : public AgentTest {
 protected:
  // Starts the agent and ranks `a` and `b` of generation 1 of job-1 on
  // `world` ranks: session_, started_.
  void StartTwoRanks(int a, int b, int world) {
    Start();
    session_ = coordinator_.AcceptAndRegister();
    ASSERT_NE(session_, nullptr);
    session_->Send(Assign("job-1", 1, {a, b}, world));
    for (int i = 0; i < 2; ++i) {
      started_.push_back(ranks_.Started(i));
      ASSERT_NE(started_.back(), nullptr);
    }
    for (int i = 0; i < 2; ++i) ASSERT_TRUE(session_->NextNotHeartbeat());  // the starts
  }
  std::vector<std::shared_ptr<FakeRank>> started_;
};

// In-place recovery renumbers a live rank process: what it reports from
// then on carries its new generation and rank, a cancel of the old
// generation leaves it alone, and one that died before the news is reported
// as exited under its new identity too.
TEST_F(AgentRegroupTest, ARegroupFilesTheSurvivingRanksUnderTheirNewIdentity) {
  ASSERT_NO_FATAL_FAILURE(StartTwoRanks(1, 2, 3));
  const std::shared_ptr<FakeSession>& session = session_;
  const std::shared_ptr<FakeRank> one = started_[0], two = started_[1];
  two->Exit(-9);
  std::optional<v1::AgentMessage> died = session->NextNotHeartbeat();
  ASSERT_TRUE(died && died->has_rank_status());
  EXPECT_EQ(died->rank_status().generation(), 1);

  session->Send(Regroup("job-1", 1, 2, 2, {{1, 0}, {2, 1}}));
  std::optional<v1::AgentMessage> renamed = session->NextNotHeartbeat();
  ASSERT_TRUE(renamed && renamed->has_rank_status());
  EXPECT_FALSE(renamed->rank_status().running());
  EXPECT_EQ(renamed->rank_status().generation(), 2);
  EXPECT_EQ(renamed->rank_status().rank(), 1);
  EXPECT_THAT(renamed->rank_status().message(), HasSubstr("before it could join"));

  session->Send(Cancel("job-1", 1));  // the old generation: nothing left in it
  one->Metric(31, 0.25);
  std::optional<v1::AgentMessage> metric = session->NextNotHeartbeat();
  ASSERT_TRUE(metric && metric->has_metrics());
  EXPECT_EQ(metric->metrics().generation(), 2);
  EXPECT_EQ(metric->metrics().point().rank(), 0);
  EXPECT_FALSE(one->terminated());
  one->Exit(0);
  std::optional<v1::AgentMessage> finished = session->NextNotHeartbeat();
  ASSERT_TRUE(finished && finished->has_rank_status());
  EXPECT_EQ(finished->rank_status().generation(), 2);
  EXPECT_EQ(finished->rank_status().rank(), 0);
  EXPECT_EQ(finished->rank_status().exit_code(), 0);
}

// A planned regroup (an elastic job grows in place): the live ranks are
// renamed and asked to leave their group at their next step boundary; a
// regroup after a loss tells them to give up the old group at once (a
// peer cut off without a TCP reset would never fail their collectives).
TEST_F(AgentRegroupTest, APlannedRegroupWaitsForTheStepBoundaryARecoveryDoesNot) {
  ASSERT_NO_FATAL_FAILURE(StartTwoRanks(0, 1, 2));
  const std::shared_ptr<FakeSession>& session = session_;
  const std::shared_ptr<FakeRank> zero = started_[0], one = started_[1];
  v1::CoordinatorMessage planned = Regroup("job-1", 1, 2, 3, {{0, 0}, {1, 1}});
  planned.mutable_regroup()->set_at_step_boundary(true);
  session->Send(planned);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (one->regroup_requests() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(zero->regroup_requests(), 1);
  EXPECT_EQ(one->regroup_requests(), 1);
  EXPECT_EQ(one->regroup_generation(), 2);
  EXPECT_EQ(one->abandoned_generation(), 0);
  zero->Metric(40, 0.25);  // the step it was in: reported as generation 2
  std::optional<v1::AgentMessage> metric = session->NextNotHeartbeat();
  ASSERT_TRUE(metric && metric->has_metrics());
  EXPECT_EQ(metric->metrics().generation(), 2);
  session->Send(Regroup("job-1", 2, 3, 2, {{0, 0}, {1, 1}}));  // after a loss
  // Once its reports carry generation 3, the agent has handled it.
  const auto handled_by = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (int step = 41; std::chrono::steady_clock::now() < handled_by; ++step) {
    zero->Metric(step, 0.25);
    metric = session->NextNotHeartbeat();
    ASSERT_TRUE(metric && metric->has_metrics());
    if (metric->metrics().generation() == 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(metric->metrics().generation(), 3);
  EXPECT_EQ(zero->regroup_requests(), 1);
  EXPECT_EQ(zero->abandoned_generation(), 2);
  EXPECT_EQ(one->abandoned_generation(), 2);
}

}  // namespace
}  // namespace trainctl::agent
