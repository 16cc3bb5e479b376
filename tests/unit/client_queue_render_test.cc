// `trainctl queue`'s rendering: exact pieces for a hand-built answer.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <tuple>

#include "client/queue_render.h"

namespace trainctl::client {
namespace {

using ::testing::HasSubstr;

// 2023-11-14 22:13:20 UTC.
constexpr int64_t kT0 = 1'700'000'000'000;

RenderContext Ctx() {
  RenderContext ctx;
  ctx.now_unix_ms = kT0 + 303'000;
  ctx.tz = absl::UTCTimeZone();
  return ctx;
}

TEST(RenderQueueTest, ShowsThePolicyTheOrderAndEachUsersStanding) {
  v1::GetQueueResponse q;
  q.set_policy_origin("/etc/trainctl/scheduling.yaml");
  q.set_half_life_hours(24);
  q.set_backfill(true);
  q.set_preemption(false);
  for (auto [name, value, dflt] : {std::tuple<const char*, int, bool>{"high", 100, false},
                                   {"normal", 0, true}}) {
    v1::PriorityClassInfo* c = q.add_classes();
    c->set_name(name);
    c->set_value(value);
    c->set_is_default(dflt);
  }
  v1::QueueEntry* first = q.add_jobs();
  first->set_position(1);
  first->set_job_id("job-7");
  first->set_name("big");
  first->set_owner("alice");
  first->set_state(v1::JOB_STATE_QUEUED);
  first->set_priority_class("high");
  first->set_priority(100);
  first->set_owner_usage_slot_hours(12.34);
  first->set_ranks(4);
  first->set_reason("needs 4 slots; 2 of 4 registered slots free");
  first->set_estimated_start_unix_ms(kT0 + 303'000 + 12 * 60'000);
  v1::QueueEntry* second = q.add_jobs();
  second->set_position(2);
  second->set_job_id("job-9");
  second->set_owner("bob");
  second->set_state(v1::JOB_STATE_RESTARTING);
  second->set_priority_class("normal");
  second->set_ranks(1);
  second->set_device("cuda");
  v1::UserStanding* alice = q.add_users();
  alice->set_user("alice");
  alice->set_slots_in_use(2);
  alice->set_slot_quota(8);
  alice->set_gpu_quota(-1);
  alice->set_borrow(true);
  alice->set_usage_slot_hours(12.34);
  alice->set_group("vision");
  const std::string out = RenderQueue(q, Ctx());
  EXPECT_THAT(out, HasSubstr("policy: /etc/trainctl/scheduling.yaml\n"));
  EXPECT_THAT(out, HasSubstr("classes: high 100, normal 0 (default); "
                             "fair-share half-life 24h; backfill on, "
                             "preemption off"));
  EXPECT_THAT(out, HasSubstr("POS  JOB"));
  EXPECT_THAT(out, HasSubstr("high 100"));
  EXPECT_THAT(out, HasSubstr("12.3"));
  EXPECT_THAT(out, HasSubstr("in 12m00s"));
  EXPECT_THAT(out, HasSubstr("needs 4 slots; 2 of 4 registered slots free\n"));
  EXPECT_THAT(out, HasSubstr("job-9 (restarting)"));
  EXPECT_THAT(out, HasSubstr("1 GPU"));
  EXPECT_THAT(out, HasSubstr("8 (borrows)"));
  EXPECT_THAT(out, HasSubstr("vision"));
  // Positions come in the order given, one row each.
  EXPECT_LT(out.find("job-7"), out.find("job-9"));
  v1::GetQueueResponse empty;
  EXPECT_THAT(RenderQueue(empty, Ctx()), HasSubstr("no job is waiting"));
}

}  // namespace
}  // namespace trainctl::client
