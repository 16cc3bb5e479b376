// The operator's scheduling file: what it defines, and that every mistake
// is refused naming the file and the field.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "coordinator/scheduling_config.h"

namespace trainctl::coordinator {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kTeam[] = R"(
classes: {low: 0, normal: 100, urgent: 1000}
default_class: normal
fair_share: {half_life_hours: 12}
backfill: false
users:
  "*": {slots: 4, max_class: normal}
  alice: {slots: 8, gpus: 2, borrow: true, max_class: urgent, group: vision}
  bob: {group: vision}
groups:
  vision: {slots: 12}
)";

SchedulingConfig Parse(const std::string& text) {
  absl::StatusOr<SchedulingConfig> config = ParseSchedulingConfig(text, "s.yaml");
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : SchedulingConfig();
}

std::string Error(const std::string& text) {
  absl::StatusOr<SchedulingConfig> config = ParseSchedulingConfig(text, "s.yaml");
  EXPECT_FALSE(config.ok());
  if (config.ok()) return "";
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(config.status().message());
}

TEST(SchedulingConfigTest, ReadsClassesQuotasGroupsAndSwitches) {
  const SchedulingConfig c = Parse(kTeam);
  ASSERT_EQ(c.classes.size(), 3u);
  EXPECT_EQ(c.classes[0].name, "urgent");  // highest first
  EXPECT_EQ(c.classes[2].name, "low");
  EXPECT_EQ(c.default_class, "normal");
  EXPECT_DOUBLE_EQ(c.half_life_hours, 12);
  EXPECT_FALSE(c.backfill);
  EXPECT_EQ(c.user_quotas.at("*").slots, 4);
  EXPECT_EQ(c.user_quotas.at("*").gpus, -1);
  EXPECT_EQ(c.user_quotas.at("alice").slots, 8);
  EXPECT_EQ(c.user_quotas.at("alice").gpus, 2);
  EXPECT_TRUE(c.user_quotas.at("alice").borrow);
  EXPECT_EQ(c.user_quotas.count("bob"), 0u);  // no quota of bob's own
  EXPECT_EQ(c.group_of_user.at("bob"), "vision");
  EXPECT_EQ(c.group_quotas.at("vision").slots, 12);
  EXPECT_EQ(c.origin, "s.yaml");
}

TEST(SchedulingConfigTest, AnEmptyFileIsTheDefault) {
  const SchedulingConfig c = Parse("");
  ASSERT_EQ(c.classes.size(), 1u);
  EXPECT_EQ(c.default_class, "normal");
  EXPECT_TRUE(c.user_quotas.empty());
  EXPECT_TRUE(c.backfill);
  EXPECT_EQ(Parse("classes: {only: 5}").default_class, "only");
}

TEST(SchedulingConfigTest, ResolvesTheDefaultAndEnforcesEachUsersMaximum) {
  const SchedulingConfig c = Parse(kTeam);
  EXPECT_EQ(c.Resolve("", "carol")->name, "normal");
  EXPECT_EQ(c.Resolve("low", "carol")->value, 0);
  EXPECT_EQ(c.Resolve("urgent", "alice")->value, 1000);
  // carol falls under "*": at most normal.
  absl::StatusOr<PriorityClass> above = c.Resolve("urgent", "carol");
  ASSERT_FALSE(above.ok());
  EXPECT_EQ(above.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(above.status().message(),
            "priority: class 'urgent' (1000) is above the highest user carol "
            "may ask for, 'normal' (100)");
  absl::StatusOr<PriorityClass> typo = c.Resolve("urgnet", "alice");
  ASSERT_FALSE(typo.ok());
  EXPECT_THAT(typo.status().message(),
              HasSubstr("priority: unknown priority class 'urgnet' (did you "
                        "mean 'urgent'? known: urgent, normal, low)"));
  EXPECT_THAT(typo.status().message(), HasSubstr("s.yaml"));
}

TEST(SchedulingConfigTest, AClassRemovedByAReloadCountsAsTheDefault) {
  const SchedulingConfig c = Parse(kTeam);
  EXPECT_EQ(c.ValueOf("urgent"), 1000);
  EXPECT_EQ(c.ValueOf("gone"), 100);
}

TEST(SchedulingConfigTest, NamesTheFieldOfEveryMistake) {
  EXPECT_EQ(Error("classes: {a: 1, b: 2}"),
            "s.yaml: default_class: is required when there are several "
            "classes (the class of a job whose spec names none)");
  EXPECT_THAT(Error("classes: {a: 1, b: 2}\ndefault_class: c"),
              HasSubstr("default_class: unknown class 'c'"));
  EXPECT_THAT(Error("classes: {High: 1}"),
              HasSubstr("classes.High: a class name is 1 to 32 of a-z"));
  EXPECT_THAT(Error("classes: {high: lots}"),
              HasSubstr("classes.high: must be an integer"));
  EXPECT_THAT(Error("classes: {}"), HasSubstr("classes: must define at least one"));
  EXPECT_THAT(Error("users: {alice: {slots: -2}}"),
              HasSubstr("users.alice.slots: must be in [0, "));
  EXPECT_THAT(Error("users: {alice: {max_class: hihg}}"),
              HasSubstr("users.alice.max_class: unknown class 'hihg'"));
  EXPECT_THAT(Error("users: {alice: {group: vison}}\ngroups: {vision: {slots: 2}}"),
              HasSubstr("users.alice.group: unknown group 'vison' (did you "
                        "mean 'vision'?"));
  EXPECT_THAT(Error("users: {\"*\": {group: vision}}\ngroups: {vision: {}}"),
              HasSubstr("users.*.group: only a named user belongs to a group"));
  EXPECT_THAT(Error("users: {alice: {slot: 2}}"), HasSubstr("users.alice.slot"));
  EXPECT_THAT(Error("preemption: sometimes"), HasSubstr("preemption"));
  EXPECT_THAT(Error("classes: {low: {value: 0, grace_seconds: -1}}"),
              HasSubstr("classes.low.grace_seconds: must be in [0, 86400]"));
  EXPECT_THAT(Error("classes: {low: {grace_seconds: 5}}"),
              HasSubstr("classes.low.value: is required"));
  EXPECT_THAT(Error("classes: {low: {value: 0, grace: 5}}"),
              HasSubstr("classes.low.grace"));
  EXPECT_THAT(Error("fair_share: {half_life_hours: 0}"),
              HasSubstr("fair_share.half_life_hours"));
  EXPECT_THAT(Error("users: {a: {slots: 1}, a: {slots: 2}}"), HasSubstr("users.a"));
  EXPECT_THAT(Error("[1, 2]"), HasSubstr("s.yaml: "));
  EXPECT_THAT(Error("classes: {a: 1"), HasSubstr("s.yaml: not valid YAML"));
}

TEST(SchedulingConfigTest, AClassMayGiveItsPreemptedJobsAGracePeriod) {
  const SchedulingConfig config = Parse(
      "classes: {low: {value: 0, grace_seconds: 600}, high: 10}\n"
      "default_class: low\npreemption: false\n");
  EXPECT_EQ(config.GraceOf("low"), 600'000);
  EXPECT_EQ(config.GraceOf("high"), PriorityClass().grace_ms);  // 2 minutes
  EXPECT_EQ(config.GraceOf("gone"), 600'000);  // the default class's
  EXPECT_EQ(config.ValueOf("high"), 10);
  EXPECT_FALSE(config.preemption);
  EXPECT_TRUE(Parse("").preemption);
}

TEST(SchedulingConfigTest, ANonexistentFileIsNotFoundNamingIt) {
  absl::StatusOr<SchedulingConfig> c =
      LoadSchedulingConfig("/nonexistent/scheduling.yaml");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(c.status().message(), HasSubstr("/nonexistent/scheduling.yaml"));
  EXPECT_THAT(c.status().message(), Not(HasSubstr("\n")));
}

}  // namespace
}  // namespace trainctl::coordinator
