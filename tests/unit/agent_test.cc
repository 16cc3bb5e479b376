// The node agent against a fake coordinator and fake ranks: registration,
// assignments, what it keeps and re-sends across a lost coordinator
// (cursors), reconnection, cancel, heartbeats and GPU slots
// (agent_regroup_test: the ranks renumbered by an in-place recovery).

#include "worker/agent/agent.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <thread>

#include "common/utf8_sanitize.h"
#include "common/rank_exit.h"
#include "tests/unit/agent_test_fixture.h"

namespace trainctl::agent {
namespace {

using ::testing::HasSubstr;

TEST_F(AgentTest, RegistersItsSlotsDevicesAndVersion) {
  AgentOptions options = Options();
  options.gpus = {"3", "5", "7"};  // more than the slots: two are used
  Start(options);
  v1::RegisterRequest hello;
  ASSERT_NE(coordinator_.AcceptAndRegister(&hello), nullptr);
  EXPECT_EQ(hello.name(), "node-a");
  EXPECT_EQ(hello.slots(), 2);
  EXPECT_EQ(hello.gpu_slots(), 2);
  EXPECT_EQ(hello.collective_host(), "10.0.0.7");
  EXPECT_EQ(hello.version(), TRAINCTL_VERSION);
  ASSERT_EQ(hello.devices_size(), 3);
  EXPECT_EQ(hello.devices(0), "cpu");
  EXPECT_EQ(hello.devices(1), "cuda:3");
  EXPECT_EQ(hello.devices(2), "cuda:5");
  EXPECT_EQ(hello.ranks_size(), 0);
}

TEST_F(AgentTest, WaitsForTheCoordinatorBeforeOpeningAStream) {
  coordinator_.SetReachable(false);
  Start();
  ASSERT_TRUE(coordinator_.AwaitWaits(1));
  EXPECT_EQ(coordinator_.streams_opened(), 0);
  coordinator_.SetReachable(true);
  EXPECT_NE(coordinator_.AcceptAndRegister(), nullptr);
}

TEST_F(AgentTest, StartsEachAssignedRankWithItsLaunchAndTheSpecSentOnce) {
  Start();
  std::shared_ptr<FakeSession> session = coordinator_.AcceptAndRegister();
  ASSERT_NE(session, nullptr);
  session->Send(Assign("job-1", 2, {0, 1}, 4));
  for (int i = 0; i < 2; ++i) {
    std::shared_ptr<FakeRank> rank = ranks_.Started(i);
    ASSERT_NE(rank, nullptr);
    const v1::RankLaunch launch = rank->launch();
    EXPECT_EQ(launch.spec().name(), "spec-of-job-1");
    EXPECT_EQ(launch.rendezvous_key(), "key-job-1");
    EXPECT_EQ(launch.job_id(), "job-1");
    EXPECT_EQ(launch.generation(), 2);
    EXPECT_EQ(launch.rank(), i);
    EXPECT_EQ(launch.world_size(), 4);
    EXPECT_EQ(launch.local_rank(), i);
    EXPECT_EQ(launch.coordinator(), "head:7070");
    EXPECT_EQ(launch.collective_host(), "10.0.0.7");
    EXPECT_TRUE(launch.cuda_visible_devices().empty());
    EXPECT_EQ(rank->command().program, "/nonexistent/trainctl-worker");
    std::optional<v1::AgentMessage> started = session->NextNotHeartbeat();
    ASSERT_TRUE(started && started->has_rank_status());
    EXPECT_TRUE(started->rank_status().running());
    EXPECT_EQ(started->rank_status().rank(), i);
    EXPECT_EQ(started->rank_status().pid(), rank->pid());
  }
}

// An assignment that arrives while a standby is being started waits for it
// and takes it. It used to start a process of its own, leaving the standby
// on a slot the rank now filled (agent_reconnect_test saw three processes
// on a one-slot worker).
TEST_F(AgentTest, AnAssignmentTakesTheStandbyBeingStarted) {
  AgentOptions options = Options();
  options.slots = 1;
  options.standby_ranks = true;
  Start(options);
  std::shared_ptr<FakeSession> session =
      coordinator_.AcceptAndRegister(nullptr, {}, /*heartbeat_interval_ms=*/10);
  ASSERT_NE(session, nullptr);
  std::shared_ptr<FakeRank> first = ranks_.Started(0);  // the standby of Run
  ASSERT_NE(first, nullptr);
  session->Send(Assign("job-1", 1, {0}, 1));
  std::optional<v1::AgentMessage> running = session->NextNotHeartbeat();
  ASSERT_TRUE(running && running->has_rank_status() && running->rank_status().running());
  ASSERT_EQ(first->launch().job_id(), "job-1");
  ASSERT_EQ(ranks_.count(), 1u);

  // job-1 ends; the next heartbeat reaps it and starts a standby, which
  // blocks in its start while job-2 arrives.
  ranks_.HoldStandbyStarts(true);
  first->Exit(0);
  ASSERT_TRUE(ranks_.AwaitHeldStandby());
  session->Send(Assign("job-2", 1, {0}, 1));
  // Read only once job-2's start is over: without the wait for the standby
  // the agent starts a process for job-2 at once and reads on; with it,
  // the read waits too, and the drain times out.
  session->Send(Cancel("job-0", 1));
  session->AwaitDrained(std::chrono::milliseconds(200));
  EXPECT_EQ(ranks_.count(), 1u)
      << "a process was started for job-2 beside the standby being started";
  ranks_.HoldStandbyStarts(false);
  std::optional<v1::AgentMessage> started;
  do {
    started = session->NextNotHeartbeat();
  } while (started && !(started->has_rank_status() && started->rank_status().running()));
  ASSERT_TRUE(started.has_value());
  EXPECT_EQ(started->rank_status().job_id(), "job-2");

  std::shared_ptr<FakeRank> second = ranks_.Started(1);
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->launch().job_id(), "job-2");
  const std::vector<std::string>& args = second->command().args;
  EXPECT_NE(std::find(args.begin(), args.end(), "--standby"), args.end())
      << "job-2 runs on a process started for it, not on the standby";
  EXPECT_EQ(ranks_.count(), 2u);
}

TEST_F(AgentTest, ReconnectsAfterTheStreamEndsAndListsItsRunningRanks) {
  ASSERT_NO_FATAL_FAILURE(StartWithOneRank());
  std::shared_ptr<FakeSession> first = session_;
  std::shared_ptr<FakeRank> rank = rank_;
  first->Drop();
  v1::RegisterRequest hello;
  ASSERT_NE(coordinator_.AcceptAndRegister(&hello), nullptr);
  EXPECT_EQ(coordinator_.streams_opened(), 2);
  ASSERT_EQ(hello.ranks_size(), 1);
  EXPECT_EQ(hello.ranks(0).job_id(), "job-1");
  EXPECT_TRUE(hello.ranks(0).running());
  EXPECT_EQ(hello.ranks(0).pid(), rank->pid());
  EXPECT_FALSE(rank->terminated());  // training goes on through the outage
}

TEST_F(AgentTest, StopEndsASessionThatIsStillRegistering) {
  Start();
  std::shared_ptr<FakeSession> session = coordinator_.Accept();
  ASSERT_NE(session, nullptr);
  ASSERT_TRUE(session->Next().has_value());  // its Register, never answered
  agent_->Stop();
  runner_.join();  // hung here when Stop() only knew registered sessions
  EXPECT_TRUE(session->ended());
  agent_.reset();
}

TEST_F(AgentTest, ARefusedRegistrationIsTriedAgain) {
  Start();
  std::shared_ptr<FakeSession> refused = coordinator_.Accept();
  ASSERT_NE(refused, nullptr);
  ASSERT_TRUE(refused->Next().has_value());  // its Register
  refused->Drop(absl::PermissionDeniedError("the certificate is for node-b"));
  EXPECT_NE(coordinator_.AcceptAndRegister(), nullptr);
}

// What a rank reported and how it exited while no coordinator listened
// reach the next one, in order: reports after its cursor, then the exit.
TEST_F(AgentTest, WhatHappenedDuringAnOutageIsSentAfterTheCursor) {
  ASSERT_NO_FATAL_FAILURE(StartWithOneRank());
  std::shared_ptr<FakeSession> first = session_;
  std::shared_ptr<FakeRank> rank = rank_;
  rank->Metric(1, 0.9);  // seq 1, and the coordinator keeps it
  std::optional<v1::AgentMessage> one = first->NextNotHeartbeat();
  ASSERT_TRUE(one && one->has_metrics());
  EXPECT_EQ(one->metrics().seq(), 1);
  rank->Metric(2, 0.8);  // seq 2: written, then lost with the coordinator
  ASSERT_TRUE(first->NextNotHeartbeat().has_value());
  first->Drop();
  rank->Line("stdout", "epoch 1 done");  // seq 3, while disconnected
  rank->Exit(0);

  v1::RegisterRequest hello;
  std::shared_ptr<FakeSession> second =
      coordinator_.AcceptAndRegister(&hello, {Cursor("job-1", 1, 0, 1)});
  ASSERT_NE(second, nullptr);
  ASSERT_EQ(hello.ranks_size(), 1);  // its exit, not also as running
  EXPECT_FALSE(hello.ranks(0).running());
  EXPECT_EQ(hello.ranks(0).exit_code(), 0);

  std::optional<v1::AgentMessage> m = second->NextNotHeartbeat();
  ASSERT_TRUE(m && m->has_metrics());
  EXPECT_EQ(m->metrics().seq(), 2);
  EXPECT_EQ(m->metrics().point().step(), 2);
  m = second->NextNotHeartbeat();
  ASSERT_TRUE(m && m->has_log());
  EXPECT_EQ(m->log().seq(), 3);
  EXPECT_EQ(m->log().line().text(), "epoch 1 done");
  m = second->NextNotHeartbeat();
  ASSERT_TRUE(m && m->has_rank_status());
  EXPECT_FALSE(m->rank_status().running());
  EXPECT_EQ(m->rank_status().exit_code(), 0);
}

// A rank whose process is gone but whose exit was not yet delivered is not
// reaped: a registration then would list it neither running nor exited.
TEST_F(AgentTest, ARankIsListedUntilItsExitIsHeard) {
  ASSERT_NO_FATAL_FAILURE(StartWithOneRank(/*heartbeat_interval_ms=*/5));
  std::shared_ptr<FakeSession> first = session_;
  std::shared_ptr<FakeRank> rank = rank_;
  rank->Vanish();
  // Each heartbeat is followed by a reap: after two, one reap has run.
  for (int beats = 0; beats < 2;) {
    std::optional<v1::AgentMessage> m = first->Next();
    ASSERT_TRUE(m.has_value());
    beats += m->has_heartbeat();
  }
  first->Drop();
  v1::RegisterRequest hello;
  ASSERT_NE(coordinator_.AcceptAndRegister(&hello), nullptr);
  ASSERT_EQ(hello.ranks_size(), 1);
  EXPECT_TRUE(hello.ranks(0).running());
  rank->Exit(0);
}

// A rank the new coordinator does not adopt (it has no cursor for it) has
// its kept reports dropped: nothing of it is sent again.
TEST_F(AgentTest, ReportsOfARankNotAdoptedAreDropped) {
  Start();
  std::shared_ptr<FakeSession> first = coordinator_.AcceptAndRegister();
  ASSERT_NE(first, nullptr);
  std::shared_ptr<FakeRank> old_rank = StartOneRank(*first, "job-old");
  first->Drop();
  old_rank->Metric(7, 0.5);
  old_rank->Exit(0);
  std::shared_ptr<FakeSession> second = coordinator_.AcceptAndRegister();
  ASSERT_NE(second, nullptr);
  // The next thing it hears of is a new rank's start, not the old job.
  std::shared_ptr<FakeRank> fresh = StartOneRank(*second, "job-new");
  ASSERT_NE(fresh, nullptr);
  fresh->Metric(1, 1.0);
  std::optional<v1::AgentMessage> m = second->NextNotHeartbeat();
  ASSERT_TRUE(m && m->has_metrics());
  EXPECT_EQ(m->metrics().job_id(), "job-new");
  EXPECT_EQ(m->metrics().seq(), 1);
}

TEST_F(AgentTest, CancelEndsTheJobsRanksUpToItsGenerationOnly) {
  Start();
  std::shared_ptr<FakeSession> session = coordinator_.AcceptAndRegister();
  ASSERT_NE(session, nullptr);
  std::shared_ptr<FakeRank> a = StartOneRank(*session, "job-a");
  std::shared_ptr<FakeRank> b = StartOneRank(*session, "job-b");
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  session->Send(Cancel("job-a", 0));  // an older generation: not this one
  session->Send(Cancel("job-a", 1));
  std::optional<v1::AgentMessage> m = session->NextNotHeartbeat();
  ASSERT_TRUE(m && m->has_rank_status());
  EXPECT_EQ(m->rank_status().job_id(), "job-a");
  EXPECT_FALSE(m->rank_status().running());
  EXPECT_EQ(m->rank_status().exit_code(), -15);
  EXPECT_TRUE(a->terminated());
  EXPECT_FALSE(b->terminated());
}

// Polls `done` for up to kWait (the agent handles messages on its thread).
bool Eventually(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + testing::kWait;
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

TEST_F(AgentTest, APreemptionAsksTheRanksToCheckpointAndStopWithinTheGrace) {
  StartWithOneRank();
  std::shared_ptr<FakeRank> other = StartOneRank(*session_, "job-2");
  ASSERT_NE(other, nullptr);
  v1::CoordinatorMessage preempt = Cancel("job-1", 1);
  preempt.mutable_cancel()->set_checkpoint_first(true);
  preempt.mutable_cancel()->set_grace_ms(45'000);
  session_->Send(preempt);
  ASSERT_TRUE(Eventually([&] { return rank_->stop_grace_ms() == 45'000; }));
  EXPECT_FALSE(rank_->terminated());  // asked, not ended
  EXPECT_EQ(other->stop_grace_ms(), -1);
  // The rank checkpoints, then exits as a stopped rank: the report first.
  v1::RankReport checkpoint;
  checkpoint.mutable_checkpoint()->set_step(21);
  rank_->Report(checkpoint);
  rank_->Exit(kRankExitStopped, "rank 0: asked to checkpoint and stop");
  std::optional<v1::AgentMessage> first = session_->NextNotHeartbeat();
  ASSERT_TRUE(first && first->has_checkpoint());
  EXPECT_EQ(first->checkpoint().checkpoint().step(), 21);
  std::optional<v1::AgentMessage> exit = session_->NextNotHeartbeat();
  ASSERT_TRUE(exit && exit->has_rank_status());
  EXPECT_EQ(exit->rank_status().exit_code(), kRankExitStopped);

  // A plain cancel during the grace ends the rank now.
  preempt.mutable_cancel()->set_job_id("job-2");
  session_->Send(preempt);
  ASSERT_TRUE(Eventually([&] { return other->stop_grace_ms() == 45'000; }));
  session_->Send(Cancel("job-2", 1));
  std::optional<v1::AgentMessage> ended = session_->NextNotHeartbeat();
  ASSERT_TRUE(ended && ended->has_rank_status());
  EXPECT_EQ(ended->rank_status().exit_code(), -15);
  EXPECT_TRUE(other->terminated());
}

TEST_F(AgentTest, HeartbeatsCarryTheClocksTimeAndEachRanksProgress) {
  ASSERT_NO_FATAL_FAILURE(StartWithOneRank(/*heartbeat_interval_ms=*/5));
  std::shared_ptr<FakeSession> session = session_;
  std::shared_ptr<FakeRank> rank = rank_;
  clock_.AdvanceMs(1234);
  v1::RankReport progress;
  progress.mutable_progress()->set_job_id("someone-elses-job");  // ignored
  progress.mutable_progress()->set_rank(9);
  progress.mutable_progress()->set_step(42);
  progress.mutable_progress()->set_phase("all_reduce");
  rank->Report(progress);
  std::optional<v1::AgentMessage> beat;
  do {
    beat = session->Next();
  } while (beat && !(beat->has_heartbeat() && beat->heartbeat().ranks_size()));
  ASSERT_TRUE(beat.has_value());
  EXPECT_EQ(beat->heartbeat().time_unix_ms(), clock_.NowUnixMs());
  const v1::RankHeartbeat& r = beat->heartbeat().ranks(0);
  EXPECT_EQ(r.job_id(), "job-1");
  EXPECT_EQ(r.generation(), 1);
  EXPECT_EQ(r.rank(), 0);
  EXPECT_EQ(r.step(), 42);
  EXPECT_EQ(r.phase(), "all_reduce");
}

TEST_F(AgentTest, AnExitsLastErrorIsSentAsValidUtf8) {
  ASSERT_NO_FATAL_FAILURE(StartWithOneRank());
  std::shared_ptr<FakeSession> session = session_;
  std::shared_ptr<FakeRank> rank = rank_;
  rank->Exit(1, std::string("bad \xff\xfe tail\xc3", 12));
  std::optional<v1::AgentMessage> m = session->NextNotHeartbeat();
  ASSERT_TRUE(m && m->has_rank_status());
  EXPECT_EQ(m->rank_status().exit_code(), 1);
  EXPECT_TRUE(IsValidUtf8(m->rank_status().message()));
  EXPECT_NE(m->rank_status().message().find("bad "), std::string::npos);
}

TEST_F(AgentTest, AGpuRankGetsAFreeGpuAndGivesItBackWhenItExits) {
  AgentOptions options = Options();
  options.gpus = {"3"};  // two slots, one with a GPU
  Start(options);
  std::shared_ptr<FakeSession> session = coordinator_.AcceptAndRegister();
  ASSERT_NE(session, nullptr);
  session->Send(Assign("job-1", 1, {0}, 1, /*gpu=*/true));
  std::shared_ptr<FakeRank> first = ranks_.Started(0);
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->launch().cuda_visible_devices(), "3");
  ASSERT_TRUE(session->NextNotHeartbeat().has_value());  // its start

  // No GPU is free for a second one: it fails, for a restart to cure.
  session->Send(Assign("job-2", 1, {0}, 1, /*gpu=*/true));
  std::optional<v1::AgentMessage> m = session->NextNotHeartbeat();
  ASSERT_TRUE(m && m->has_rank_status());
  EXPECT_EQ(m->rank_status().job_id(), "job-2");
  EXPECT_EQ(m->rank_status().exit_code(), 1);
  EXPECT_EQ(ranks_.count(), 1u);

  first->Exit(0);
  ASSERT_TRUE(session->NextNotHeartbeat().has_value());  // its exit
  session->Send(Assign("job-3", 1, {0}, 1, /*gpu=*/true));
  std::shared_ptr<FakeRank> third = ranks_.Started(1);
  ASSERT_NE(third, nullptr);
  EXPECT_EQ(third->launch().cuda_visible_devices(), "3");
}

}  // namespace
}  // namespace trainctl::agent
