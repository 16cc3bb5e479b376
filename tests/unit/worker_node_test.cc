// The worker's start-up decisions: who runs the ranks, the join token file,
// and the flags' bounds.

#include "worker/worker_node.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>

#include <CLI/CLI.hpp>

#include "tests/common/scoped_temp_dir.h"

namespace trainctl::worker {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr uid_t kRoot = 0;
constexpr uid_t kAlice = 1000;

// A user table of two: alice (1000) and nobody (65534).
absl::StatusOr<agent::RankCommand::User> LookUp(const std::string& name) {
  if (name == "alice") return agent::RankCommand::User{kAlice, kAlice, {}};
  if (name == "nobody") return agent::RankCommand::User{65534, 65534, {}};
  return absl::NotFoundError("no user named '" + name + "'");
}

WorkerFlags Flags(const std::string& rank_user, bool allow_root = false,
                  bool join_only = false) {
  WorkerFlags flags;
  flags.rank_user = rank_user;
  flags.allow_root_ranks = allow_root;
  flags.join_only = join_only;
  return flags;
}

TEST(RankUserTest, ARootWorkerRefusesRootRanksUnlessTold) {
  absl::StatusOr<std::optional<agent::RankCommand::User>> refused =
      RankUser(Flags(""), kRoot, LookUp);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("give --rank-user USER"));
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("--allow-root-ranks"));
  absl::StatusOr<std::optional<agent::RankCommand::User>> allowed =
      RankUser(Flags("", /*allow_root=*/true), kRoot, LookUp);
  ASSERT_TRUE(allowed.ok());
  EXPECT_FALSE(allowed->has_value());  // as the worker: root
  // A join step runs no ranks.
  EXPECT_TRUE(RankUser(Flags("", false, /*join_only=*/true), kRoot, LookUp).ok());
}

TEST(RankUserTest, ARootWorkerSwitchesRanksToTheRankUser) {
  absl::StatusOr<std::optional<agent::RankCommand::User>> user =
      RankUser(Flags("nobody"), kRoot, LookUp);
  ASSERT_TRUE(user.ok()) << user.status();
  ASSERT_TRUE(user->has_value());
  EXPECT_EQ((*user)->uid, 65534u);
}

TEST(RankUserTest, OnlyRootCanSwitchToAnotherUser) {
  absl::StatusOr<std::optional<agent::RankCommand::User>> refused =
      RankUser(Flags("nobody"), kAlice, LookUp);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("--rank-user needs the worker to run as root"));
  // Naming oneself needs no switch, and an ordinary worker needs no flag.
  absl::StatusOr<std::optional<agent::RankCommand::User>> self =
      RankUser(Flags("alice"), kAlice, LookUp);
  ASSERT_TRUE(self.ok());
  EXPECT_FALSE(self->has_value());
  EXPECT_TRUE(RankUser(Flags(""), kAlice, LookUp).ok());
}

TEST(RankUserTest, AnUnknownUserIsNamed) {
  EXPECT_THAT(std::string(RankUser(Flags("mallory"), kRoot, LookUp)
                              .status()
                              .message()),
              HasSubstr("mallory"));
}

TEST(JoinTokenFileTest, TheTokenWithoutWhitespaceAndErrorsWithoutContents) {
  testing::ScopedTempDir dir("join-token");
  const std::string path = dir.path() + "/join.token";
  std::ofstream(path) << "  tcjoin-s3cret\n\n";
  absl::StatusOr<std::string> token = ReadJoinTokenFile(path);
  ASSERT_TRUE(token.ok()) << token.status();
  EXPECT_EQ(*token, "tcjoin-s3cret");

  const std::string blank = dir.path() + "/blank.token";
  std::ofstream(blank) << " \n\t\n";
  absl::Status empty = ReadJoinTokenFile(blank).status();
  EXPECT_EQ(empty.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(empty.message()),
              HasSubstr("--join-token-file " + blank + ": the file is empty"));

  absl::Status missing = ReadJoinTokenFile(dir.path() + "/none").status();
  EXPECT_THAT(std::string(missing.message()), HasSubstr("--join-token-file"));
  EXPECT_THAT(std::string(missing.message()), Not(HasSubstr("s3cret")));
}

TEST(WorkerFlagsTest, SlotsAreBoundedAndDefaultsHold) {
  WorkerFlags flags;
  CLI::App app;
  AddWorkerFlags(app, flags);
  EXPECT_NO_THROW(app.parse("--slots 4 --name node-b", false));
  EXPECT_EQ(flags.agent.slots, 4);
  EXPECT_EQ(flags.agent.name, "node-b");
  EXPECT_EQ(flags.gpus, "auto");
  EXPECT_FALSE(flags.join_only);
  WorkerFlags greedy;
  CLI::App again;
  AddWorkerFlags(again, greedy);
  EXPECT_THROW(again.parse("--slots 1025", false), CLI::ValidationError);
}

}  // namespace
}  // namespace trainctl::worker
