#include "coordinator/report_limiter.h"

#include <gtest/gtest.h>

namespace trainctl::coordinator {
namespace {

TEST(ReportLimiterTest, BurstThenRateAndTheDropCountComesWithTheNextAdmit) {
  ReportLimiter limiter(/*rate_per_s=*/10, /*burst=*/5);
  int admitted = 0;
  for (int i = 0; i < 8; ++i) admitted += limiter.Admit("job-1", 0, 1000).admit;
  EXPECT_EQ(admitted, 5);  // the burst, then nothing in the same millisecond
  // 100 ms later one token has come back (10 a second).
  ReportLimiter::Decision d = limiter.Admit("job-1", 0, 1100);
  EXPECT_TRUE(d.admit);
  EXPECT_EQ(d.dropped_before, 3);
  EXPECT_FALSE(limiter.Admit("job-1", 0, 1100).admit);
  d = limiter.Admit("job-1", 0, 1200);
  EXPECT_TRUE(d.admit);
  EXPECT_EQ(d.dropped_before, 1);
  // Tokens never exceed the burst, however long the pause.
  admitted = 0;
  for (int i = 0; i < 8; ++i) admitted += limiter.Admit("job-1", 0, 900'000).admit;
  EXPECT_EQ(admitted, 5);
}

TEST(ReportLimiterTest, RanksAndJobsHaveTheirOwnBuckets) {
  ReportLimiter limiter(1, 2);
  EXPECT_TRUE(limiter.Admit("job-1", 0, 0).admit);
  EXPECT_TRUE(limiter.Admit("job-1", 0, 0).admit);
  EXPECT_FALSE(limiter.Admit("job-1", 0, 0).admit);
  EXPECT_TRUE(limiter.Admit("job-1", 1, 0).admit);
  EXPECT_TRUE(limiter.Admit("job-2", 0, 0).admit);
  limiter.Forget("job-1");
  EXPECT_TRUE(limiter.Admit("job-1", 0, 0).admit);  // a fresh bucket
  EXPECT_TRUE(limiter.Admit("job-2", 0, 0).admit);   // job-2's second token
  EXPECT_FALSE(limiter.Admit("job-2", 0, 0).admit);
}

}  // namespace
}  // namespace trainctl::coordinator
