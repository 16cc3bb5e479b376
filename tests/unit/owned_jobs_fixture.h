#pragma once

// Jobs of two users on a real JobManager, and a fixed token table standing
// in for the token store: what the HTTP port's access rules are tested on
// (http_auth_test, and the dashboard in Chromium: dashboard_auth_test).

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "coordinator/auth/caller.h"
#include "job_manager_fixture.h"

namespace trainctl::coordinator {

// Tokens: alice-token and bob-token (users), root-token (admin),
// worker-token (worker w1); anything else is an unknown token.
inline absl::StatusOr<auth::Caller> FakeBearerCheck(
    absl::string_view authorization) {
  using auth::Caller;
  static const auto* const kTokens = new std::map<std::string, Caller>{
      {"alice-token", {"alice", Caller::Role::kUser}},
      {"bob-token", {"bob", Caller::Role::kUser}},
      {"root-token", {"root", Caller::Role::kAdmin}},
      {"worker-token", {"w1", Caller::Role::kWorker}}};
  if (!absl::StartsWith(authorization, "Bearer ")) {
    return absl::UnauthenticatedError("expected \"Bearer TOKEN\"");
  }
  auto it = kTokens->find(std::string(authorization.substr(7)));
  if (it == kTokens->end()) return absl::UnauthenticatedError("unknown token");
  return it->second;
}

class OwnedJobsTest : public ::testing::Test {
 protected:
  // job-1 belongs to alice, job-2 to bob, each one rank, both running on
  // worker w1 (2 slots). They are submitted through one JobManager, given
  // owners in the store, and recovered by the one under test: the way owned
  // jobs come back after a restart.
  void SetUp() override {
    {
      EventHub events;
      Rendezvous rendezvous;
      JobManager submitter(clock_, events, rendezvous, store_, 5'000, 1'000);
      ASSERT_TRUE(submitter.Submit(Spec(1), false).ok());
      ASSERT_TRUE(submitter.Submit(Spec(1), false).ok());
      ASSERT_TRUE(submitter.Flush().ok());
    }
    absl::StatusOr<StoredState> stored = store_.LoadAll();
    ASSERT_TRUE(stored.ok()) << stored.status();
    ASSERT_EQ(stored->jobs.size(), 2u);
    for (StoredJob& s : stored->jobs) {
      s.job.set_owner(s.job.id() == "job-1" ? "alice" : "bob");
      ASSERT_TRUE(store_.PutJob(s.job).ok());
    }
    ASSERT_TRUE(jobs_.Recover().ok());
    v1::RegisterRequest reg;
    reg.set_name("w1");
    reg.set_slots(2);
    reg.set_collective_host("127.0.0.1");
    ASSERT_TRUE(jobs_.RegisterWorker(reg, link_).ok());
  }

  FakeClock clock_;
  EventHub events_;
  Rendezvous rendezvous_;
  InMemoryJobStore store_;
  JobManager jobs_{clock_, events_, rendezvous_, store_, 5'000, 1'000};
  std::shared_ptr<FakeAgentLink> link_ = std::make_shared<FakeAgentLink>();
};

}  // namespace trainctl::coordinator
