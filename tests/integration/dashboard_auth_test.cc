// The dashboard in headless Chromium over HTTPS with bearer tokens, served
// by the coordinator's HttpServer and HttpRoutes in this process on a real
// JobManager that holds jobs of two users: the token taken from the URL's
// fragment and sent with every API call, the token prompt after a 401, and
// another user's job refused.

#include <stdlib.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "coordinator/http/http_routes.h"
#include "coordinator/http/http_server.h"
#include "coordinator/http/rpc_stats.h"
#include "headless_chromium.h"
#include "owned_jobs_fixture.h"
#include "self_signed_cert.h"

namespace trainctl::coordinator::http {
namespace {

using trainctl::testing::Attribute;
using trainctl::testing::ChromiumUnusableReason;

class DashboardAuthTest : public OwnedJobsTest {
 protected:
  void SetUp() override {
    OwnedJobsTest::SetUp();
    if (HasFatalFailure()) return;
    char tmpl[] = "/tmp/trainctl-dashboard-XXXXXX";
    dir_ = mkdtemp(tmpl);
    if (const std::string why = ChromiumUnusableReason(dir_); !why.empty()) {
      GTEST_SKIP() << why;
    }
    const trainctl::testing::PemFiles pem =
        trainctl::testing::WriteSelfSigned(dir_, "server");
    HttpServerOptions options;
    options.tls_cert_file = pem.cert;
    options.tls_key_file = pem.key;
    server_ = std::make_unique<HttpServer>(
        [this](const HttpRequest& r) { return routes_.Handle(r); }, options);
    absl::StatusOr<int> port = server_->Start("127.0.0.1:0");
    ASSERT_TRUE(port.ok()) << port.status();
    port_ = *port;
  }

  // Chromium's profiles and DOMs are kept for a failed test only.
  void TearDown() override {
    server_.reset();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  // The DOM of https://127.0.0.1:PORT`path_and_fragment` after `budget_ms`
  // of the page's time.
  std::string Page(const std::string& path_and_fragment, int budget_ms) {
    bool ok = false;
    const std::string dom = trainctl::testing::DumpDom(
        dir_, "https://127.0.0.1:" + std::to_string(port_) + path_and_fragment,
        budget_ms, &ok);
    EXPECT_TRUE(ok) << dom;
    return dom;
  }

  std::string dir_;
  RpcStats rpc_stats_;
  std::atomic<bool> stopping_{false};
  HttpRoutes routes_{jobs_, events_, rpc_stats_, clock_, stopping_,
                     FakeBearerCheck};
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
};

TEST_F(DashboardAuthTest, TheTokenInTheFragmentShowsTheUsersOwnJobs) {
  const std::string list = Page("/#token=alice-token", 4'000);
  EXPECT_NE(list.find("data-auth=\"ok\""), std::string::npos) << list;
  EXPECT_NE(list.find("data-jobs=\"1\""), std::string::npos) << list;
  EXPECT_NE(list.find("data-job=\"job-1\""), std::string::npos);
  EXPECT_EQ(list.find("job-2"), std::string::npos);
  EXPECT_NE(list.find("<td>alice</td>"), std::string::npos);  // the owner
  // Why it is in its state, and the worker's heartbeat as an age.
  const size_t reason = list.find("<td class=\"reason\" title=\"");
  ASSERT_NE(reason, std::string::npos) << list;
  EXPECT_NE(list.find("(generation 1)</td>", reason), std::string::npos) << list;
  EXPECT_NE(list.find(" ago</td>"), std::string::npos) << list;
  EXPECT_EQ(list.find("id=\"token-prompt\""), std::string::npos);
  // The job page of her own job, the token again from the fragment.
  const std::string job = Page("/jobs/job-1#token=alice-token", 4'000);
  EXPECT_NE(job.find("data-state=\"running\""), std::string::npos) << job;
  EXPECT_NE(job.find("data-auth=\"ok\""), std::string::npos);
  EXPECT_EQ(Attribute(job, "chart-loss", "data-points"), "0");
}

TEST_F(DashboardAuthTest, WithoutAGoodTokenThePageAsksForOne) {
  const std::string none = Page("/", 3'000);
  EXPECT_NE(none.find("id=\"token-prompt\""), std::string::npos) << none;
  EXPECT_NE(none.find("data-auth=\"needed\""), std::string::npos);
  EXPECT_NE(none.find("this needs a token"), std::string::npos);
  EXPECT_EQ(none.find("data-jobs="), std::string::npos);
  const std::string wrong = Page("/#token=nope", 3'000);
  EXPECT_NE(wrong.find("id=\"token-prompt\""), std::string::npos) << wrong;
  EXPECT_NE(wrong.find("unknown token"), std::string::npos);
  EXPECT_EQ(wrong.find("data-jobs="), std::string::npos);
}

TEST_F(DashboardAuthTest, AnotherUsersJobIsRefusedAndAnAdminsIsNot) {
  const std::string refused = Page("/jobs/job-2#token=alice-token", 3'000);
  EXPECT_NE(refused.find("job job-2 belongs to bob"), std::string::npos)
      << refused;
  EXPECT_EQ(refused.find("data-state="), std::string::npos);
  EXPECT_EQ(refused.find("id=\"token-prompt\""), std::string::npos);
  const std::string admin = Page("/jobs/job-2#token=root-token", 3'000);
  EXPECT_NE(admin.find("data-state=\"running\""), std::string::npos) << admin;
  const std::string list = Page("/#token=root-token", 3'000);
  EXPECT_NE(list.find("data-jobs=\"2\""), std::string::npos) << list;
}

TEST_F(DashboardAuthTest, TheQueueShowsWhoWaitsAndWhyButOnlyAdminsSeeOthersNames) {
  std::string spec = Spec(2);
  spec.replace(spec.find("name: t"), 7, "name: bobs-run");
  ASSERT_TRUE(jobs_.Submit(spec, false, "", "bob").ok());  // job-3 waits
  const std::string alices = Page("/#token=alice-token", 4'000);
  EXPECT_NE(alices.find("data-queued=\"1\""), std::string::npos) << alices;
  EXPECT_NE(alices.find("data-queued-job=\"job-3\""), std::string::npos);
  EXPECT_NE(alices.find("needs 2 slots; 0 of 2 registered slots free"),
            std::string::npos);
  EXPECT_NE(alices.find("normal 0 (default)"), std::string::npos);
  EXPECT_EQ(alices.find("bobs-run"), std::string::npos);
  const std::string roots = Page("/#token=root-token", 4'000);
  EXPECT_NE(roots.find("bobs-run"), std::string::npos) << roots;
  // Each user's standing: bob holds one slot, and has no quota.
  const size_t bob = roots.find("<tr data-user=\"bob\"><td>bob</td><td class=\"num\">1</td>"
                                "<td class=\"num\">–</td>");
  EXPECT_NE(bob, std::string::npos) << roots;
}

}  // namespace
}  // namespace trainctl::coordinator::http
