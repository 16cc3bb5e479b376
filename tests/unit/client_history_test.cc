// `trainctl history`: its table and totals, and the --since/--until forms.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "client/history_render.h"

namespace trainctl::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// 2023-11-14 22:13:20 UTC.
constexpr int64_t kT0 = 1'700'000'000'000;

RenderContext Ctx() {
  RenderContext ctx;
  ctx.now_unix_ms = kT0 + 7'200'000;
  ctx.tz = absl::UTCTimeZone();
  return ctx;
}

v1::JobAccount Account(const std::string& id, const std::string& owner,
                       v1::JobState state, double slot_hours) {
  v1::JobAccount a;
  a.set_job_id(id);
  a.set_name("mlp");
  a.set_owner(owner);
  a.set_state(state);
  a.set_submitted_unix_ms(kT0);
  a.set_first_started_unix_ms(kT0 + 5'000);
  a.set_waited_ms(5'000);
  a.set_elapsed_ms(1'800'000);
  a.set_ranks(2);
  a.set_slot_hours(slot_hours);
  return a;
}

TEST(RenderHistoryTest, OneRowPerJobThenTheTotalsPerUser) {
  v1::GetHistoryResponse h;
  v1::JobAccount* done = h.add_jobs();
  *done = Account("job-1", "alice", v1::JOB_STATE_SUCCEEDED, 1.0);
  done->set_finished_unix_ms(kT0 + 1'805'000);
  done->set_gpu_hours(1.0);
  done->set_restarts(1);
  done->set_preemptions(2);
  done->mutable_final_train()->mutable_values()->insert({"loss", 0.31234});
  auto* eval = done->mutable_final_eval()->mutable_values();
  eval->insert({"eval_accuracy", 0.8712});
  eval->insert({"eval_ms", 812});  // a timing: never the EVAL column
  *h.add_jobs() = Account("job-2", "bob", v1::JOB_STATE_RUNNING, 0.5);
  const std::string out = RenderHistory(h, Ctx());

  EXPECT_THAT(out, HasSubstr("JOB    NAME  OWNER  STATE      SUBMITTED"));
  EXPECT_THAT(out, HasSubstr("SLOT-H  GPU-H  RESTARTS  LOSS    EVAL"));
  EXPECT_THAT(out, HasSubstr("job-1  mlp   alice  SUCCEEDED  2023-11-14 22:13:20  5s"));
  EXPECT_THAT(out, HasSubstr("30m00s   2      1.00    1.00   1/2       0.3123  "));
  EXPECT_THAT(out, HasSubstr("accuracy 0.8712"));
  EXPECT_THAT(out, Not(HasSubstr("812")));
  // A running job's elapsed time goes on: marked '+'.
  EXPECT_THAT(out, HasSubstr("30m00s+  2      0.50    -      0         -       -"));
  EXPECT_THAT(out, HasSubstr("2 jobs: 1.50 slot-hours, 1.00 GPU-hours "
                             "(alice 1.00, bob 0.50)\n"));
}

TEST(RenderHistoryTest, OneUserHasNoSharesAndNoJobsSaySo) {
  v1::GetHistoryResponse h;
  *h.add_jobs() = Account("job-1", "alice", v1::JOB_STATE_FAILED, 0.25);
  EXPECT_THAT(RenderHistory(h, Ctx()),
              HasSubstr("1 job: 0.25 slot-hours, 0.00 GPU-hours\n"));
  EXPECT_EQ(RenderHistory(v1::GetHistoryResponse(), Ctx()), "No jobs in this window.\n");
}

TEST(ParseWhenTest, DatesInTheZoneAndAgesBeforeNow) {
  const int64_t now = kT0;
  const absl::TimeZone utc = absl::UTCTimeZone();
  EXPECT_EQ(*ParseWhen("90m", "--since", now, utc), now - 90 * 60'000);
  EXPECT_EQ(*ParseWhen("36h", "--since", now, utc), now - 36 * 3'600'000LL);
  EXPECT_EQ(*ParseWhen("7d", "--since", now, utc), now - 7 * 86'400'000LL);
  EXPECT_EQ(*ParseWhen("2w", "--since", now, utc), now - 14 * 86'400'000LL);
  EXPECT_EQ(*ParseWhen("2023-11-14", "--since", now, utc), 1'699'920'000'000);
  EXPECT_EQ(*ParseWhen("2023-11-14 22:13", "--since", now, utc), 1'699'999'980'000);
  EXPECT_EQ(*ParseWhen("2023-11-14T22:13:20", "--until", now, utc), kT0);
  EXPECT_EQ(*ParseWhen("2023-11-14", "--since", now, absl::FixedTimeZone(3600)),
            1'699'920'000'000 - 3'600'000);
  for (const char* bad : {"", "yesterday", "7", "d", "-3d", "7y", "2023-13-01",
                          "2023-11-14 25:00"}) {
    absl::StatusOr<int64_t> when = ParseWhen(bad, "--until", now, utc);
    ASSERT_FALSE(when.ok()) << bad;
    EXPECT_EQ(when.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(when.status().message()), HasSubstr("--until: '"));
    EXPECT_THAT(std::string(when.status().message()), HasSubstr("7d"));
  }
}

}  // namespace
}  // namespace trainctl::client
