// What the coordinator's HTTP port answers, on a real JobManager: health,
// metrics, the dashboard's JSON (paging, errors) and its embedded files.

#include <atomic>
#include <string>

#include <gtest/gtest.h>

#include "coordinator/http/http_routes.h"
#include "coordinator/http/rpc_stats.h"
#include "job_manager_fixture.h"

namespace trainctl::coordinator::http {
namespace {

class HttpRoutesTest : public JobManagerTest {
 protected:
  HttpResponse Get(const std::string& path,
                   std::map<std::string, std::string> query = {}) {
    HttpRequest r;
    r.method = "GET";
    r.path = path;
    r.query = std::move(query);
    return routes_.Handle(r);
  }

  RpcStats rpc_stats_;
  std::atomic<bool> stopping_{false};
  HttpRoutes routes_{jobs_, events_, rpc_stats_, clock_, stopping_};
};

TEST_F(HttpRoutesTest, HealthzFollowsShutdown) {
  EXPECT_EQ(Get("/healthz").status, 200);
  EXPECT_EQ(Get("/healthz").body, "ok\n");
  stopping_ = true;
  EXPECT_EQ(Get("/healthz").status, 503);
}

TEST_F(HttpRoutesTest, MetricsCountTheQueuedJob) {
  ASSERT_TRUE(jobs_.Submit(Spec(2), false).ok());
  HttpResponse m = Get("/metrics");
  EXPECT_EQ(m.status, 200);
  EXPECT_EQ(m.content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(m.body.find("\ntrainctl_jobs{state=\"queued\"} 1\n"),
            std::string::npos)
      << m.body;
  EXPECT_NE(m.body.find("# TYPE trainctl_rpc_requests_total counter"),
            std::string::npos);
}

TEST_F(HttpRoutesTest, JobJsonAndEventPaging) {
  ASSERT_TRUE(jobs_.Submit(Spec(2), false).ok());
  AddWorker("w1", 2);  // the job starts: more events
  const size_t total = Events("job-1").size();
  ASSERT_GE(total, 2u);

  HttpResponse list = Get("/api/jobs");
  EXPECT_EQ(list.content_type, "application/json");
  EXPECT_NE(list.body.find("\"id\":\"job-1\""), std::string::npos) << list.body;
  EXPECT_EQ(list.body.find("\"ranks\":[{"), std::string::npos);  // summary only
  HttpResponse job = Get("/api/jobs/job-1");
  EXPECT_NE(job.body.find("\"ranks\":[{"), std::string::npos) << job.body;

  HttpResponse page = Get("/api/jobs/job-1/events", {{"from_seq", "1"}, {"limit", "1"}});
  EXPECT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("\"seq\":\"1\""), std::string::npos) << page.body;
  EXPECT_EQ(page.body.find("\"seq\":\"2\""), std::string::npos);
  EXPECT_NE(page.body.find("\"next_seq\":2,\"closed\":false}"), std::string::npos);
  HttpResponse rest = Get("/api/jobs/job-1/events", {{"from_seq", "2"}});
  EXPECT_NE(rest.body.find("\"next_seq\":" + std::to_string(total + 1)),
            std::string::npos)
      << rest.body;
  ASSERT_TRUE(jobs_.Cancel("job-1", "test").ok());
  HttpResponse closed = Get("/api/jobs/job-1/events", {{"from_seq", "1000"}});
  EXPECT_NE(closed.body.find("\"events\":[],\"next_seq\":1000,\"closed\":true}"),
            std::string::npos)
      << closed.body;
}

TEST_F(HttpRoutesTest, TheQueueInPolicyOrderWithWhyEachJobWaits) {
  AddWorker("w1", 1);
  ASSERT_TRUE(jobs_.Submit(Spec(1), false).ok());  // runs
  ASSERT_TRUE(jobs_.Submit(Spec(1), false).ok());  // waits
  HttpResponse queue = Get("/api/queue");
  EXPECT_EQ(queue.status, 200);
  EXPECT_EQ(queue.content_type, "application/json");
  EXPECT_NE(queue.body.find("\"job_id\":\"job-2\""), std::string::npos) << queue.body;
  EXPECT_EQ(queue.body.find("\"job_id\":\"job-1\""), std::string::npos);
  EXPECT_NE(queue.body.find("\"position\":1"), std::string::npos);
  EXPECT_NE(queue.body.find("\"reason\":\"needs 1 slots; 0 of 1 registered slots free\""),
            std::string::npos) << queue.body;
  EXPECT_NE(queue.body.find("\"name\":\"normal\""), std::string::npos);
}

TEST_F(HttpRoutesTest, ErrorsAreJsonWithTheRightStatus) {
  EXPECT_EQ(Get("/api/jobs/nope").status, 404);
  EXPECT_NE(Get("/api/jobs/nope").body.find("\"error\""), std::string::npos);
  EXPECT_EQ(Get("/api/jobs/nope/events").status, 404);
  ASSERT_TRUE(jobs_.Submit(Spec(1), false).ok());
  EXPECT_EQ(Get("/api/jobs/job-1/events", {{"from_seq", "x"}}).status, 400);
  EXPECT_EQ(Get("/api/jobs/job-1/events", {{"limit", "0"}}).status, 400);
  EXPECT_EQ(Get("/api/jobs/job-1/events", {{"from_seq", "-3"}}).status, 400);
  EXPECT_EQ(Get("/api/jobs/job-1/other").status, 404);
  EXPECT_EQ(Get("/api/nothing").status, 404);
  EXPECT_EQ(Get("/nothing").status, 404);
}

TEST_F(HttpRoutesTest, ServesTheEmbeddedDashboard) {
  for (const char* page : {"/", "/jobs/job-7", "/compare"}) {
    HttpResponse r = Get(page);
    EXPECT_EQ(r.status, 200);
    EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
    EXPECT_NE(r.body.find("<script src=\"/static/app.js\">"), std::string::npos);
  }
  HttpResponse js = Get("/static/app.js");
  EXPECT_EQ(js.status, 200);
  EXPECT_EQ(js.content_type, "text/javascript; charset=utf-8");
  EXPECT_NE(js.body.find("textContent"), std::string::npos);
  bool has_csp = false;
  for (const auto& [name, value] : js.headers) {
    has_csp |= name == "Content-Security-Policy" &&
               value.find("script-src 'self'") != std::string::npos;
  }
  EXPECT_TRUE(has_csp);
  EXPECT_EQ(Get("/static/charts.js").status, 200);
  EXPECT_EQ(Get("/static/style.css").content_type, "text/css; charset=utf-8");
  EXPECT_EQ(Get("/static/../index.html").status, 404);
  EXPECT_EQ(Get("/static/missing.js").status, 404);
}

}  // namespace
}  // namespace trainctl::coordinator::http
