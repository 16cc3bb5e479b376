// Bearer tokens on the coordinator's HTTP port: who may read /metrics and
// the dashboard's JSON, and whose jobs each person sees, on a real
// JobManager holding jobs of two users.

#include <atomic>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "coordinator/http/http_routes.h"
#include "coordinator/http/rpc_stats.h"
#include "owned_jobs_fixture.h"

namespace trainctl::coordinator::http {
namespace {

class HttpAuthTest : public OwnedJobsTest {
 protected:
  HttpResponse Get(const std::string& path, const std::string& token,
                   std::map<std::string, std::string> query = {}) {
    HttpRequest r;
    r.method = "GET";
    r.path = path;
    r.query = std::move(query);
    if (!token.empty()) r.headers.emplace_back("authorization", "Bearer " + token);
    return routes_.Handle(r);
  }

  static std::string Header(const HttpResponse& r, const std::string& name) {
    for (const auto& [n, v] : r.headers) {
      if (n == name) return v;
    }
    return "<none>";
  }

  RpcStats rpc_stats_;
  std::atomic<bool> stopping_{false};
  HttpRoutes routes_{jobs_, events_, rpc_stats_, clock_, stopping_,
                     FakeBearerCheck};
};

TEST_F(HttpAuthTest, NoTokenIsA401ThatSaysHowToAuthenticate) {
  for (const char* path : {"/metrics", "/api/jobs", "/api/jobs/job-1",
                           "/api/jobs/job-1/events", "/api/workers",
                           "/api/nothing"}) {
    HttpResponse r = Get(path, "");
    EXPECT_EQ(r.status, 401) << path;
    EXPECT_EQ(Header(r, "WWW-Authenticate"), "Bearer realm=\"trainctl\"");
    EXPECT_NE(r.body.find("Authorization: Bearer"), std::string::npos) << r.body;
    EXPECT_EQ(r.body.find("job-1\""), std::string::npos) << r.body;
  }
  HttpResponse api = Get("/api/jobs", "");
  EXPECT_EQ(api.content_type, "application/json");
  EXPECT_EQ(api.body.rfind("{\"error\":", 0), 0u) << api.body;
  HttpResponse metrics = Get("/metrics", "");
  EXPECT_EQ(metrics.content_type, "text/plain; charset=utf-8");
  // One line: the reason.
  EXPECT_EQ(metrics.body.find('\n'), metrics.body.size() - 1) << metrics.body;
}

TEST_F(HttpAuthTest, WrongTokensAre401InvalidToken) {
  for (const char* token : {"nope", "alice-token2", "alice"}) {
    HttpResponse r = Get("/api/jobs", token);
    EXPECT_EQ(r.status, 401) << token;
    EXPECT_EQ(Header(r, "WWW-Authenticate"),
              "Bearer realm=\"trainctl\", error=\"invalid_token\"");
    EXPECT_NE(r.body.find("unknown token"), std::string::npos) << r.body;
  }
  HttpRequest basic;
  basic.method = "GET";
  basic.path = "/metrics";
  basic.headers.emplace_back("authorization", "Basic YWxpY2U6eA==");
  EXPECT_EQ(routes_.Handle(basic).status, 401);
  // Two headers, one of them valid: refused, not guessed between.
  HttpRequest twice = basic;
  twice.headers.emplace_back("authorization", "Bearer alice-token");
  HttpResponse r = routes_.Handle(twice);
  EXPECT_EQ(r.status, 401);
  EXPECT_NE(r.body.find("more than one"), std::string::npos) << r.body;
  // A worker's identity is no person's.
  HttpResponse worker = Get("/metrics", "worker-token");
  EXPECT_EQ(worker.status, 403);
  EXPECT_NE(worker.body.find("\"w1\" is not a person"), std::string::npos)
      << worker.body;
}

TEST_F(HttpAuthTest, ProbesAndTheDashboardPageNeedNoToken) {
  EXPECT_EQ(Get("/healthz", "").status, 200);
  EXPECT_EQ(Get("/healthz", "nope").status, 200);
  for (const char* page : {"/", "/jobs/job-2", "/static/app.js",
                           "/static/charts.js", "/static/style.css"}) {
    EXPECT_EQ(Get(page, "").status, 200) << page;
  }
}

TEST_F(HttpAuthTest, AUserSeesOnlyTheirOwnJobs) {
  HttpResponse list = Get("/api/jobs", "alice-token");
  EXPECT_EQ(list.status, 200);
  EXPECT_NE(list.body.find("\"id\":\"job-1\""), std::string::npos) << list.body;
  EXPECT_NE(list.body.find("\"owner\":\"alice\""), std::string::npos);
  EXPECT_EQ(list.body.find("job-2"), std::string::npos) << list.body;
  EXPECT_EQ(list.body.find("bob"), std::string::npos);

  EXPECT_EQ(Get("/api/jobs/job-1", "alice-token").status, 200);
  EXPECT_EQ(Get("/api/jobs/job-1/events", "alice-token").status, 200);
  for (const char* path : {"/api/jobs/job-2", "/api/jobs/job-2/events"}) {
    HttpResponse r = Get(path, "alice-token");
    EXPECT_EQ(r.status, 403) << path;
    EXPECT_NE(r.body.find("job job-2 belongs to bob"), std::string::npos)
        << r.body;
    EXPECT_EQ(r.body.find("\"owner\""), std::string::npos);
  }
  // Bob is the mirror image.
  EXPECT_EQ(Get("/api/jobs/job-2", "bob-token").status, 200);
  EXPECT_EQ(Get("/api/jobs/job-1/events", "bob-token").status, 403);
  // Unknown jobs are still 404, and bad queries still 400, for a user too.
  EXPECT_EQ(Get("/api/jobs/job-9", "alice-token").status, 404);
  EXPECT_EQ(Get("/api/jobs/job-1/events", "alice-token", {{"limit", "0"}}).status,
            400);

  // The workers are there for everyone; whose ranks run on them is not.
  HttpResponse workers = Get("/api/workers", "alice-token");
  EXPECT_EQ(workers.status, 200);
  EXPECT_NE(workers.body.find("\"name\":\"w1\""), std::string::npos);
  EXPECT_NE(workers.body.find("\"ranks\":[{\"job_id\":\"job-1\",\"generation\":1,"
                              "\"rank\":0}]"),
            std::string::npos)
      << workers.body;
  // A person's scrape covers their own jobs; an admin's the cluster.
  HttpResponse metrics = Get("/metrics", "bob-token");
  EXPECT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.body.find("trainctl_jobs{state=\"running\"} 1"),
            std::string::npos)
      << metrics.body;
  EXPECT_EQ(metrics.body.find("job=\"job-1\""), std::string::npos) << metrics.body;
  EXPECT_NE(metrics.body.find("job=\"job-2\""), std::string::npos) << metrics.body;
  HttpResponse all = Get("/metrics", "root-token");
  EXPECT_NE(all.body.find("trainctl_jobs{state=\"running\"} 2"),
            std::string::npos)
      << all.body;
}

TEST_F(HttpAuthTest, AnAdminSeesEveryJob) {
  HttpResponse list = Get("/api/jobs", "root-token");
  EXPECT_EQ(list.status, 200);
  EXPECT_NE(list.body.find("\"id\":\"job-1\""), std::string::npos) << list.body;
  EXPECT_NE(list.body.find("\"id\":\"job-2\""), std::string::npos) << list.body;
  for (const char* path : {"/api/jobs/job-1", "/api/jobs/job-2",
                           "/api/jobs/job-2/events", "/metrics"}) {
    EXPECT_EQ(Get(path, "root-token").status, 200) << path;
  }
  HttpResponse workers = Get("/api/workers", "root-token");
  EXPECT_NE(workers.body.find("\"job_id\":\"job-1\""), std::string::npos) << workers.body;
  EXPECT_NE(workers.body.find("\"job_id\":\"job-2\""), std::string::npos) << workers.body;
}

}  // namespace
}  // namespace trainctl::coordinator::http
