// FollowJob: resume after a broken stream, duplicate suppression and the
// bounded retry window, driven by a scripted fake stream and a fake clock.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <deque>
#include <vector>

#include "client/watch.h"

namespace trainctl::client {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

v1::JobEvent Transition(int64_t seq, v1::JobState from, v1::JobState to) {
  v1::JobEvent e;
  e.set_seq(seq);
  e.mutable_transition()->set_from(from);
  e.mutable_transition()->set_to(to);
  return e;
}

v1::JobEvent Log(int64_t seq) {
  v1::JobEvent e;
  e.set_seq(seq);
  e.mutable_log()->set_text("line");
  return e;
}

// One scripted stream attempt: the events it delivers, then its status.
struct Attempt {
  std::vector<v1::JobEvent> events;
  absl::Status status;
};

class FollowJobTest : public ::testing::Test {
 protected:
  FollowJobTest() {
    options_.now = [this] { return now_; };
    options_.sleep = [this](absl::Duration d) {
      sleeps_.push_back(d);
      now_ += d;
    };
  }

  absl::StatusOr<v1::JobState> Follow() {
    auto open = [this](int64_t from_seq, const EventCallback& cb) {
      from_seqs_.push_back(from_seq);
      if (script_.empty()) return absl::UnavailableError("connection refused");
      Attempt a = script_.front();
      script_.pop_front();
      for (const auto& e : a.events) cb(e);
      return a.status;
    };
    return FollowJob(
        "j-1", open,
        [this](const v1::JobEvent& e) { seen_.push_back(e.seq()); }, options_);
  }

  absl::Time now_ = absl::FromUnixSeconds(1'700'000'000);
  FollowOptions options_;
  std::deque<Attempt> script_;
  std::vector<int64_t> from_seqs_;
  std::vector<int64_t> seen_;
  std::vector<absl::Duration> sleeps_;
};

TEST_F(FollowJobTest, EndsWithFinalStateOfCompleteStream) {
  script_.push_back(
      {{Transition(1, v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_QUEUED),
        Transition(2, v1::JOB_STATE_QUEUED, v1::JOB_STATE_RUNNING),
        Transition(3, v1::JOB_STATE_RUNNING, v1::JOB_STATE_FAILED)},
       absl::OkStatus()});
  absl::StatusOr<v1::JobState> state = Follow();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(*state, v1::JOB_STATE_FAILED);
  EXPECT_THAT(from_seqs_, ElementsAre(1));
  EXPECT_THAT(seen_, ElementsAre(1, 2, 3));
}

TEST_F(FollowJobTest, ResumesAfterLastSeqAndSkipsReplayedEvents) {
  script_.push_back(
      {{Transition(1, v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_QUEUED),
        Transition(2, v1::JOB_STATE_QUEUED, v1::JOB_STATE_RUNNING), Log(3)},
       absl::UnavailableError("coordinator restarting")});
  script_.push_back({{}, absl::UnavailableError("connection refused")});
  // A sloppy server replays seq 3 again; it must not be printed twice.
  script_.push_back(
      {{Log(3), Log(4),
        Transition(5, v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED)},
       absl::OkStatus()});
  absl::StatusOr<v1::JobState> state = Follow();
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(*state, v1::JOB_STATE_SUCCEEDED);
  EXPECT_THAT(from_seqs_, ElementsAre(1, 4, 4));
  EXPECT_THAT(seen_, ElementsAre(1, 2, 3, 4, 5));
  EXPECT_THAT(sleeps_,
              ElementsAre(absl::Milliseconds(250), absl::Milliseconds(500)));
}

TEST_F(FollowJobTest, GivesUpAfterMaxOutage) {
  script_.push_back(
      {{Transition(1, v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_RUNNING)},
       absl::UnavailableError("socket closed")});
  absl::StatusOr<v1::JobState> state = Follow();
  ASSERT_FALSE(state.ok());
  EXPECT_EQ(state.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(state.status().message()),
              HasSubstr("last event seq 1"));
  absl::Duration slept;
  for (absl::Duration d : sleeps_) slept += d;
  EXPECT_EQ(slept, absl::Seconds(60));
  for (absl::Duration d : sleeps_) EXPECT_LE(d, absl::Seconds(5));
}

TEST_F(FollowJobTest, NonRetryableErrorIsReturnedAtOnce) {
  script_.push_back({{}, absl::NotFoundError("no job j-1")});
  absl::StatusOr<v1::JobState> state = Follow();
  EXPECT_EQ(state.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(sleeps_.empty());
}

TEST_F(FollowJobTest, LongQuietStreamStartsAFreshOutageWindow) {
  options_.healthy_after = absl::Seconds(15);
  // Attempt 3 stays open quietly for 10 minutes, then breaks.
  int attempts = 0;
  auto open = [&](int64_t, const EventCallback& cb) {
    ++attempts;
    if (attempts == 1) {
      cb(Transition(1, v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_RUNNING));
      return absl::UnavailableError("x");
    }
    if (attempts == 3) {
      now_ += absl::Minutes(10);
      return absl::UnavailableError("x");
    }
    if (attempts == 5) {
      cb(Transition(2, v1::JOB_STATE_RUNNING, v1::JOB_STATE_SUCCEEDED));
      return absl::OkStatus();
    }
    return absl::UnavailableError("x");
  };
  absl::StatusOr<v1::JobState> state = FollowJob(
      "j-1", open, [](const v1::JobEvent&) {}, options_);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_EQ(*state, v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(attempts, 5);
}

TEST(RetryableTest, Classification) {
  EXPECT_TRUE(IsRetryableStreamEnd(absl::OkStatus()));
  EXPECT_TRUE(IsRetryableStreamEnd(absl::UnavailableError("")));
  EXPECT_TRUE(IsRetryableStreamEnd(absl::InternalError("")));
  EXPECT_FALSE(IsRetryableStreamEnd(absl::NotFoundError("")));
  EXPECT_FALSE(IsRetryableStreamEnd(absl::PermissionDeniedError("")));
}

}  // namespace
}  // namespace trainctl::client
