// The coordinator's side of stragglers (rank 0 finds them): kept in the
// job for status and the dashboard, and said in its log with the worker's
// name; a recovery clears them; the job is not restarted for it.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "job_manager_fixture.h"

namespace trainctl::coordinator {
namespace {

TEST_F(JobManagerTest, AStragglerIsNamedWithItsWorkerAndTheJobGoesOn) {
  AddWorker("w1", 1);
  AddWorker("w2", 1);
  const v1::Job job = *jobs_.Submit(Spec(2), false);
  auto report = [&](int64_t seq, double recovered) {
    v1::RankMetrics m;
    m.set_job_id(job.id());
    m.set_generation(1);
    m.set_seq(seq);
    m.mutable_point()->set_kind("straggler");
    m.mutable_point()->set_step(120);
    (*m.mutable_point()->mutable_values())["rank"] = 1;
    (*m.mutable_point()->mutable_values())["phase"] = 1;  // compute
    (*m.mutable_point()->mutable_values())["ratio"] = 1.84;
    (*m.mutable_point()->mutable_values())["steps"] = 60;
    (*m.mutable_point()->mutable_values())["recovered"] = recovered;
    const std::string rank0 = jobs_.Get(job.id())->ranks(0).worker();
    ASSERT_TRUE(jobs_.OnRankMetrics(rank0, m).ok());
  };
  report(1, 0);
  v1::Job now = *jobs_.Get(job.id());
  EXPECT_EQ(now.state(), v1::JOB_STATE_RUNNING);
  ASSERT_EQ(now.stragglers_size(), 1);
  const std::string slow_worker = now.ranks(1).worker();
  EXPECT_EQ(now.stragglers(0).worker(), slow_worker);
  EXPECT_EQ(now.stragglers(0).phase(), "compute");
  EXPECT_EQ(now.stragglers(0).since_step(), 120);
  std::string log;
  for (const v1::JobEvent& e : Events(job.id())) {
    if (e.has_log()) log += e.log().text() + "\n";
  }
  EXPECT_THAT(log, ::testing::HasSubstr(
                       "[trainctl] straggler: rank 1 on worker " + slow_worker +
                       " spends 1.84x its peers' median compute time per step "
                       "(60 steps in a row, at step 120)"));
  report(2, 1);
  EXPECT_EQ(jobs_.Get(job.id())->stragglers_size(), 0);
}

}  // namespace
}  // namespace trainctl::coordinator
