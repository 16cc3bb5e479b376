// KeptReports: the agent's per-rank copies of metrics and log lines, for a
// restarted coordinator. Bounded per rank and in bytes, and freed once the
// rank's exit has been delivered (security review L4).

#include "worker/agent/kept_reports.h"

#include <gtest/gtest.h>

#include <string>

namespace trainctl::agent {
namespace {

v1::AgentMessage LogLine(const RankId& id, const std::string& text) {
  v1::AgentMessage m;
  m.mutable_log()->set_job_id(std::get<0>(id));
  m.mutable_log()->set_generation(std::get<1>(id));
  m.mutable_log()->mutable_line()->set_rank(std::get<2>(id));
  m.mutable_log()->mutable_line()->set_text(text);
  return m;
}

const RankId kRank0{"job-1", 1, 0};
const RankId kRank1{"job-1", 1, 1};

TEST(KeptReportsTest, NumbersEachRanksReportsAndResendsAfterTheCursor) {
  KeptReports kept(100, 1 << 20);
  for (int i = 0; i < 5; ++i) {
    v1::AgentMessage m = LogLine(kRank0, "line");
    kept.Number(kRank0, &m);
    EXPECT_EQ(m.log().seq(), i + 1);
  }
  v1::AgentMessage other = LogLine(kRank1, "line");
  kept.Number(kRank1, &other);
  EXPECT_EQ(other.log().seq(), 1);
  bool missing = true;
  std::vector<v1::AgentMessage> after = kept.After(kRank0, 3, &missing);
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0].log().seq(), 4);
  EXPECT_EQ(after[1].log().seq(), 5);
  EXPECT_FALSE(missing);
}

TEST(KeptReportsTest, KeepsAtMostThePerRankLimitAndSaysWhatIsMissing) {
  KeptReports kept(3, 1 << 20);
  for (int i = 0; i < 10; ++i) {
    v1::AgentMessage m = LogLine(kRank0, "line");
    kept.Number(kRank0, &m);
  }
  EXPECT_EQ(kept.count(kRank0), 3u);
  bool missing = false;
  std::vector<v1::AgentMessage> after = kept.After(kRank0, 0, &missing);
  ASSERT_EQ(after.size(), 3u);
  EXPECT_EQ(after[0].log().seq(), 8);
  EXPECT_TRUE(missing);
}

TEST(KeptReportsTest, TotalBytesAreBoundedAndTheLargestKeeperPays) {
  const size_t limit = 64 * 1024;
  KeptReports kept(100'000, limit);
  v1::AgentMessage quiet = LogLine(kRank1, "quiet");
  kept.Number(kRank1, &quiet);
  const std::string big(1000, 'x');
  for (int i = 0; i < 1000; ++i) {
    v1::AgentMessage m = LogLine(kRank0, big);
    kept.Number(kRank0, &m);
    ASSERT_LE(kept.bytes(), limit);
  }
  EXPECT_GT(kept.count(kRank0), 10u);
  EXPECT_LT(kept.count(kRank0), 1000u);
  EXPECT_EQ(kept.count(kRank1), 1u);  // the chatty rank lost its oldest
}

TEST(KeptReportsTest, ADeliveredExitFreesTheRanksReportsOneHeartbeatLater) {
  KeptReports kept(100, 1 << 20);
  v1::AgentMessage first = LogLine(kRank0, "line");
  kept.Number(kRank0, &first);
  v1::AgentMessage second = LogLine(kRank1, "line");
  kept.Number(kRank1, &second);
  kept.ExitDelivered(kRank0);
  kept.ForgetDelivered();  // the tick right after: still kept
  EXPECT_EQ(kept.count(kRank0), 1u);
  kept.ForgetDelivered();  // one tick later: freed
  EXPECT_EQ(kept.count(kRank0), 0u);
  EXPECT_EQ(kept.ranks(), 1u);
  EXPECT_EQ(kept.count(kRank1), 1u);
  EXPECT_EQ(kept.bytes(), second.ByteSizeLong());
}

TEST(KeptReportsTest, ASessionEndingKeepsWhatItDelivered) {
  KeptReports kept(100, 1 << 20);
  v1::AgentMessage m = LogLine(kRank0, "line");
  kept.Number(kRank0, &m);
  kept.ExitDelivered(kRank0);
  kept.ForgetDelivered();
  kept.SessionEnded();  // the coordinator may have died with the exit
  kept.ForgetDelivered();
  kept.ForgetDelivered();
  EXPECT_EQ(kept.count(kRank0), 1u);
  kept.RetainOnly({});  // the next registration did not adopt it
  EXPECT_EQ(kept.ranks(), 0u);
  EXPECT_EQ(kept.bytes(), 0u);
}

}  // namespace
}  // namespace trainctl::agent
