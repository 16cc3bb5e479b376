// trainctl end to end against an in-process fake Jobs service on a unix
// socket (no network): exit codes, spec error output, watch and JSONL.

#include <gmock/gmock.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "client/commands.h"
#include "trainctl/v1/jobs.grpc.pb.h"

namespace trainctl::client {
namespace {

using ::testing::HasSubstr;

v1::JobEvent TransitionEvent(int64_t seq, v1::JobState from, v1::JobState to) {
  v1::JobEvent e;
  e.set_seq(seq);
  e.set_job_id("j-1");
  e.mutable_transition()->set_from(from);
  e.mutable_transition()->set_to(to);
  e.mutable_transition()->set_reason("because");
  return e;
}

class FakeJobs final : public v1::Jobs::Service {
 public:
  grpc::Status SubmitJob(grpc::ServerContext*, const v1::SubmitJobRequest* req,
                         v1::SubmitJobResponse* resp) override {
    if (req->spec_text().find("bad") != std::string::npos) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "ranks: must be >= 1; optimizer.lr: must be > 0");
    }
    resp->mutable_job()->set_id(req->dry_run() ? "" : "j-1");
    resp->mutable_job()->set_state(v1::JOB_STATE_QUEUED);
    return grpc::Status::OK;
  }
  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest* req,
                      v1::Job* job) override {
    if (req->job_id() != "j-1" && req->job_id() != "j-fail") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          "no job " + req->job_id());
    }
    job->set_id(req->job_id());
    job->set_state(v1::JOB_STATE_RUNNING);
    job->set_total_steps(100);
    return grpc::Status::OK;
  }
  // A job a page, as a coordinator does when they are big: the CLI must
  // follow next_page_token to the end.
  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest* req,
                        v1::ListJobsResponse* resp) override {
    const std::vector<std::string> ids = {"job-1", "job-2", "job-3"};
    auto next = ids.begin();
    if (!req->page_token().empty()) {
      next = std::find(ids.begin(), ids.end(), req->page_token()) + 1;
    }
    if (next == ids.end()) return grpc::Status::OK;
    v1::Job* job = resp->add_jobs();
    job->set_id(*next);
    job->set_state(v1::JOB_STATE_SUCCEEDED);
    if (next + 1 != ids.end()) resp->set_next_page_token(*next);
    return grpc::Status::OK;
  }
  grpc::Status WatchJob(grpc::ServerContext*, const v1::WatchJobRequest* req,
                        grpc::ServerWriter<v1::JobEvent>* writer) override {
    const bool fail = req->job_id() == "j-fail";
    std::vector<v1::JobEvent> events = {
        TransitionEvent(1, v1::JOB_STATE_UNSPECIFIED, v1::JOB_STATE_QUEUED),
        TransitionEvent(2, v1::JOB_STATE_QUEUED, v1::JOB_STATE_RUNNING)};
    v1::JobEvent metric;
    metric.set_seq(3);
    metric.mutable_metric()->set_kind("train");
    metric.mutable_metric()->set_step(10);
    (*metric.mutable_metric()->mutable_values())["loss"] = 0.5;
    events.push_back(metric);
    events.push_back(
        TransitionEvent(4, v1::JOB_STATE_RUNNING,
                        fail ? v1::JOB_STATE_FAILED : v1::JOB_STATE_SUCCEEDED));
    for (const auto& e : events) {
      if (e.seq() >= req->from_seq()) writer->Write(e);
    }
    return grpc::Status::OK;
  }
};

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    socket_ =
        "unix:/tmp/trainctl_cli_test_" + std::to_string(getpid()) + ".sock";
    grpc::ServerBuilder builder;
    builder.AddListeningPort(socket_, grpc::InsecureServerCredentials());
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    server_->Shutdown();
    if (!spec_path_.empty()) std::remove(spec_path_.c_str());
  }

  int Run(std::vector<const char*> args) {
    // The fake coordinator in this process serves plaintext.
    args.insert(args.begin(),
                {"trainctl", "--coordinator", socket_.c_str(), "--insecure"});
    std::ostringstream out, err;
    const int code =
        RunCli(static_cast<int>(args.size()), args.data(), out, err);
    out_ = out.str();
    err_ = err.str();
    return code;
  }

  std::string WriteSpec(const std::string& text) {
    spec_path_ = "/tmp/trainctl_cli_test_" + std::to_string(getpid()) + ".yaml";
    std::ofstream(spec_path_) << text;
    return spec_path_;
  }

  FakeJobs service_;
  std::unique_ptr<grpc::Server> server_;
  std::string socket_;
  std::string spec_path_;
  std::string out_, err_;
};

TEST_F(CliTest, SubmitPrintsId) {
  const std::string path = WriteSpec("name: ok\n");
  EXPECT_EQ(Run({"submit", path.c_str()}), 0);
  EXPECT_EQ(out_, "j-1\n");
}

TEST_F(CliTest, InvalidSpecListsProblemsAndExitsTwo) {
  const std::string path = WriteSpec("name: bad\n");
  EXPECT_EQ(Run({"submit", path.c_str()}), 2);
  EXPECT_EQ(err_,
            "invalid job spec " + path +
                ":\n  ranks: must be >= 1\n  optimizer.lr: must be > 0\n");
}

TEST_F(CliTest, SubmitFollowExitsByFinalState) {
  const std::string path = WriteSpec("name: ok\n");
  EXPECT_EQ(Run({"submit", path.c_str(), "--follow"}), 0);
  EXPECT_THAT(out_, HasSubstr("j-1\n"));
  EXPECT_THAT(out_, HasSubstr("train step 10/100 epoch 1 loss 0.5000\n"));
  EXPECT_THAT(out_, HasSubstr("RUNNING -> SUCCEEDED: because\n"));
}

TEST_F(CliTest, WatchFailedJobExitsOneAndJsonIsOneObjectPerLine) {
  EXPECT_EQ(Run({"watch", "j-fail", "--output", "json"}), 1);
  std::istringstream lines(out_);
  std::string line;
  int n = 0;
  while (std::getline(lines, line)) {
    ++n;
    EXPECT_EQ(line.front(), '{');
    EXPECT_EQ(line.back(), '}');
  }
  EXPECT_EQ(n, 4);
}

TEST_F(CliTest, ListFollowsEveryPage) {
  EXPECT_EQ(Run({"list", "--all", "-q"}), 0) << err_;
  EXPECT_EQ(out_, "job-1\njob-2\njob-3\n");
}

TEST_F(CliTest, UnknownJobExitsFour) {
  EXPECT_EQ(Run({"status", "j-nope"}), 4);
  EXPECT_THAT(err_, HasSubstr("no job j-nope"));
}

}  // namespace
}  // namespace trainctl::client
