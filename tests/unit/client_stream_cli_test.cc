// logs / metrics / plot end to end against an in-process fake Jobs service
// on a unix socket: folding, CSV/JSONL, --from-seq, the end of a
// non-following read of a running job, and -f across a broken stream; and
// a one-shot command's second try when its call found no connection.

#include <gmock/gmock.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "client/commands.h"
#include "trainctl/v1/jobs.grpc.pb.h"

namespace trainctl::client {
namespace {

using ::testing::HasSubstr;

v1::JobEvent Transition(int64_t seq, v1::JobState to) {
  v1::JobEvent e;
  e.set_seq(seq);
  e.set_time_unix_ms(1000 * seq);
  e.mutable_transition()->set_to(to);
  return e;
}
v1::JobEvent Log(int64_t seq, int32_t rank, int64_t ms, const std::string& t) {
  v1::JobEvent e;
  e.set_seq(seq);
  e.set_time_unix_ms(ms);
  e.mutable_log()->set_rank(rank);
  e.mutable_log()->set_stream("stdout");
  e.mutable_log()->set_text(t + "\n");
  e.mutable_log()->set_time_unix_ms(ms);
  return e;
}
v1::JobEvent Metric(int64_t seq, const std::string& kind, int64_t step,
                    const std::string& key, double value) {
  v1::JobEvent e;
  e.set_seq(seq);
  e.set_time_unix_ms(1000 * seq);
  e.mutable_metric()->set_kind(kind);
  e.mutable_metric()->set_step(step);
  (*e.mutable_metric()->mutable_values())[key] = value;
  return e;
}

// seq 1..10 of a finished job.
std::vector<v1::JobEvent> History() {
  return {Transition(1, v1::JOB_STATE_QUEUED),
          Transition(2, v1::JOB_STATE_RUNNING),
          Log(3, 1, 5000, "hello"),
          Log(4, 0, 5200, "hello"),
          Log(5, 1, 5300, "only one"),
          Log(6, 0, 7000, "hello"),
          Metric(7, "train", 8, "loss", 2.5),
          Metric(8, "eval", 8, "eval_accuracy", 0.5),
          Metric(9, "train", 16, "loss", 1.25),
          Transition(10, v1::JOB_STATE_SUCCEEDED)};
}

class FakeJobs final : public v1::Jobs::Service {
 public:
  std::atomic<int> live_connections{0};
  std::atomic<int> snapshot_requests{0};  // WatchJob with follow: false

  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest* req,
                      v1::Job* job) override {
    if (req->job_id() == "j-nope") {
      return grpc::Status(grpc::StatusCode::NOT_FOUND, "no job j-nope");
    }
    job->set_id(req->job_id());
    job->set_state(req->job_id() == "j-done" ? v1::JOB_STATE_SUCCEEDED
                                             : v1::JOB_STATE_RUNNING);
    return grpc::Status::OK;
  }
  grpc::Status WatchJob(grpc::ServerContext* ctx,
                        const v1::WatchJobRequest* req,
                        grpc::ServerWriter<v1::JobEvent>* writer) override {
    std::vector<v1::JobEvent> events = History();
    if (req->job_id() == "j-run") events.pop_back();  // never ends
    const bool live = req->job_id() == "j-live";
    const int connection = live ? ++live_connections : 0;
    for (const auto& e : events) {
      if (e.seq() < req->from_seq()) continue;
      // j-live: the first connection breaks after seq 5 (a coordinator
      // restart), the second stays quiet for a while first, so the client
      // has to follow.
      if (live && connection == 1 && e.seq() == 6) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "restarting");
      }
      if (live && connection == 2 && e.seq() == 9) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1500));
      }
      writer->Write(e);
    }
    // As the coordinator: without follow the stream ends after what is
    // published; otherwise a running job's stream stays open.
    if (req->has_follow() && !req->follow()) {
      ++snapshot_requests;
      return grpc::Status::OK;
    }
    if (req->job_id() == "j-run") {
      while (!ctx->IsCancelled()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
    }
    return grpc::Status::OK;
  }

  // list -w across a coordinator's shutdown: the first stream lists j-1
  // and breaks as a stopping coordinator ends it (UNAVAILABLE); the next
  // call reaches it still stopping and is cancelled by the server; the
  // third, on the coordinator that came back, lists again, sends j-1's
  // change to SUCCEEDED and ends.
  std::atomic<int> list_connections{0};
  grpc::Status WatchJobs(grpc::ServerContext*, const v1::WatchJobsRequest*,
                         grpc::ServerWriter<v1::WatchJobsResponse>* writer) override {
    const int connection = ++list_connections;
    if (connection == 2) return grpc::Status(grpc::StatusCode::CANCELLED, "");
    v1::Job job;
    job.set_id("j-1");
    job.set_state(v1::JOB_STATE_RUNNING);
    job.mutable_spec()->set_name("small");
    v1::WatchJobsResponse list;
    *list.add_jobs() = job;
    list.set_list_page(true);
    list.set_list_end(true);
    writer->Write(list);
    if (connection == 1) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          "coordinator is shutting down; list -w again");
    }
    v1::WatchJobsResponse change;
    *change.add_jobs() = job;
    change.mutable_change()->set_from(v1::JOB_STATE_RUNNING);
    change.mutable_change()->set_to(v1::JOB_STATE_SUCCEEDED);
    change.mutable_change()->set_reason("all 2 ranks finished");
    writer->Write(change);
    return grpc::Status::OK;
  }
};

class StreamCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Keep a developer's own config file out of the test.
    setenv("XDG_CONFIG_HOME", "/nonexistent-trainctl-test", 1);
    socket_ = "unix:/tmp/trainctl_stream_cli_test_" +
              std::to_string(getpid()) + ".sock";
    grpc::ServerBuilder builder;
    builder.AddListeningPort(socket_, grpc::InsecureServerCredentials());
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override { server_->Shutdown(); }

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

  FakeJobs service_;
  std::unique_ptr<grpc::Server> server_;
  std::string socket_;
  std::string out_, err_;
};

TEST_F(StreamCliTest, LogsFoldsRanksPerSecond) {
  EXPECT_EQ(Run({"logs", "j-done"}), 0) << err_;
  EXPECT_EQ(out_,
            "[ranks 0-1] hello\n[rank 1] only one\n[rank 0] hello\n");
  EXPECT_EQ(Run({"logs", "j-done", "--rank", "1"}), 0);
  EXPECT_EQ(out_, "[rank 1] hello\n[rank 1] only one\n");
  EXPECT_EQ(Run({"logs", "j-done", "--since", "1970-01-01T00:00:06Z"}), 0);
  EXPECT_EQ(out_, "[rank 0] hello\n");
  EXPECT_EQ(Run({"logs", "j-done", "-o", "json"}), 0);
  EXPECT_THAT(out_, HasSubstr("{\"seq\":3,\"time_unix_ms\":5000,\"ranks\":[0,1],"
                              "\"stream\":\"stdout\",\"text\":\"hello\"}\n"));
  EXPECT_EQ(Run({"logs", "j-nope"}), 4);
}

TEST_F(StreamCliTest, MetricsCsvJsonlAndFromSeq) {
  EXPECT_EQ(Run({"metrics", "j-done"}), 0) << err_;
  EXPECT_EQ(out_,
            "seq,time_unix_ms,kind,step,epoch,rank,eval_accuracy,loss\n"
            "7,7000,train,8,0,0,,2.5\n"
            "8,8000,eval,8,0,0,0.5,\n"
            "9,9000,train,16,0,0,,1.25\n");
  EXPECT_EQ(Run({"metrics", "j-done", "--format", "jsonl", "--from-seq", "8"}),
            0);
  EXPECT_EQ(out_,
            "{\"seq\":8,\"time_unix_ms\":8000,\"kind\":\"eval\",\"step\":8,"
            "\"epoch\":0,\"rank\":0,\"values\":{\"eval_accuracy\":0.5}}\n"
            "{\"seq\":9,\"time_unix_ms\":9000,\"kind\":\"train\",\"step\":16,"
            "\"epoch\":0,\"rank\":0,\"values\":{\"loss\":1.25}}\n");
  // --output json picks jsonl.
  EXPECT_EQ(Run({"--output", "json", "metrics", "j-done", "--from-seq", "9"}),
            0);
  EXPECT_THAT(out_, HasSubstr("{\"seq\":9,"));
  // Past the final event: nothing, and -f still ends (the job is final);
  // following, the default is the long form.
  EXPECT_EQ(Run({"metrics", "j-done", "--from-seq", "11", "-f"}), 0);
  EXPECT_EQ(out_, "seq,time_unix_ms,kind,step,epoch,rank,metric,value\n");
  EXPECT_EQ(Run({"metrics", "j-done", "--from-seq", "11", "-f", "--format", "csv"}), 0);
  EXPECT_EQ(out_, "seq,time_unix_ms,kind,step,epoch,rank\n");
}

TEST_F(StreamCliTest, WithoutFollowARunningJobEndsOnceCaughtUp) {
  // The CLI asks for what is published (follow: false) and ends with it;
  // a stream that stayed open would hang the command (the test's timeout).
  EXPECT_EQ(Run({"metrics", "j-run", "--format", "jsonl"}), 0) << err_;
  EXPECT_EQ(service_.snapshot_requests.load(), 1);
  EXPECT_EQ(std::count(out_.begin(), out_.end(), '\n'), 3);
}

TEST_F(StreamCliTest, FollowSurvivesABrokenStreamWithoutLossOrRepeats) {
  EXPECT_EQ(Run({"logs", "j-live", "-f"}), 0) << err_;
  EXPECT_EQ(out_,
            "[ranks 0-1] hello\n[rank 1] only one\n[rank 0] hello\n");
  EXPECT_THAT(err_, HasSubstr("resuming from seq 6"));
  service_.live_connections = 0;
  EXPECT_EQ(Run({"metrics", "j-live", "-f"}), 0) << err_;
  EXPECT_EQ(out_,
            "seq,time_unix_ms,kind,step,epoch,rank,metric,value\n"
            "7,7000,train,8,0,0,loss,2.5\n"
            "8,8000,eval,8,0,0,eval_accuracy,0.5\n"
            "9,9000,train,16,0,0,loss,1.25\n");
}

TEST_F(StreamCliTest, ListWatchGoesOnWhenAStoppingCoordinatorCancelsIt) {
  EXPECT_EQ(Run({"list", "-w"}), 0) << err_;
  EXPECT_EQ(service_.list_connections, 3);
  // Listed twice (after the break), then the change; one header.
  EXPECT_THAT(out_, ::testing::ContainsRegex(
                        "j-1 +small +RUNNING[^\n]*\n(.*\n)?j-1 +small +RUNNING"
                        "[^\n]*\nj-1 +small +SUCCEEDED"));
  EXPECT_EQ(out_.find("ID "), out_.rfind("ID ")) << out_;
  EXPECT_THAT(err_, HasSubstr("listing again in 250ms"));
  EXPECT_THAT(err_, HasSubstr("listing again in 500ms"));
}

TEST_F(StreamCliTest, PlotWritesAnSvgWithOnePointPerStep) {
  const std::string file = ::testing::TempDir() + "/plot" +
                           std::to_string(getpid()) + ".svg";
  EXPECT_EQ(Run({"plot", "j-done", "-o", file.c_str()}), 0) << err_;
  EXPECT_EQ(out_, "wrote " + file + ": loss (2 points), eval_accuracy (1 point)\n");
  std::ifstream in(file);
  std::string svg((std::istreambuf_iterator<char>(in)), {});
  EXPECT_THAT(svg, HasSubstr("data-metric=\"loss\""));
  // -o before the subcommand is the output format, after it the file.
  EXPECT_EQ(Run({"-o", "json", "plot", "j-done", "-o", file.c_str()}), 0);
  EXPECT_EQ(out_, "{\"file\":\"" + file + "\",\"series\":[{\"job\":\"j-done\","
                  "\"metric\":\"loss\",\"points\":2},{\"job\":\"j-done\","
                  "\"metric\":\"eval_accuracy\",\"points\":1}]}\n");
  EXPECT_EQ(Run({"plot", "j-done", "-o", file.c_str(), "--output", "json"}), 0);
  EXPECT_THAT(out_, HasSubstr("{\"file\":"));
  EXPECT_EQ(Run({"plot", "j-done", "--metric", "nope", "-o", file.c_str()}), 1);
  EXPECT_THAT(err_, HasSubstr("it has: eval_accuracy, loss"));
  std::remove(file.c_str());
}

TEST_F(StreamCliTest, MalformedConfigFileIsAUsageErrorNamingFileAndKey) {
  const std::string dir = ::testing::TempDir() + "/xdg" + std::to_string(getpid());
  std::filesystem::create_directories(dir + "/trainctl");
  std::ofstream(dir + "/trainctl/config.yaml") << "outptu: json\n";
  setenv("XDG_CONFIG_HOME", dir.c_str(), 1);
  EXPECT_EQ(Run({"metrics", "j-done"}), 2);
  EXPECT_THAT(err_, HasSubstr("config file " + dir +
                              "/trainctl/config.yaml: unknown key 'outptu'"));
  // A valid file sets the output format; the flag still wins.
  std::ofstream(dir + "/trainctl/config.yaml") << "output: json\n";
  EXPECT_EQ(Run({"logs", "j-done", "--rank", "1"}), 0);
  EXPECT_THAT(out_, HasSubstr("\"ranks\":[1]"));
  EXPECT_EQ(Run({"logs", "j-done", "--rank", "1", "-o", "table"}), 0);
  EXPECT_EQ(out_, "[rank 1] hello\n[rank 1] only one\n");
  std::filesystem::remove_all(dir);
}

// A one-shot command whose call found no connection waits once for the
// channel (Debian's gRPC 1.51 can fail a connect still in progress,
// grpc/grpc#35064). Here the first try finds no coordinator at all and
// one comes up a moment later; without the second try the command fails.
TEST(OneShotCliTest, ACallThatFoundNoConnectionWaitsOnceForTheCoordinator) {
  setenv("XDG_CONFIG_HOME", "/nonexistent-trainctl-test", 1);
  const std::string socket =
      "unix:/tmp/trainctl_late_coordinator_" + std::to_string(getpid()) + ".sock";
  FakeJobs service;
  std::unique_ptr<grpc::Server> server;
  std::thread comes_up([&] {
    // Well inside the channel's first reconnect (0.5 s after the failure).
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    grpc::ServerBuilder builder;
    builder.AddListeningPort(socket, grpc::InsecureServerCredentials());
    builder.RegisterService(&service);
    server = builder.BuildAndStart();
  });
  std::vector<const char*> args{"trainctl", "--coordinator", socket.c_str(),
                                "--insecure", "status", "j-done"};
  std::ostringstream out, err;
  const int code = RunCli(static_cast<int>(args.size()), args.data(), out, err);
  comes_up.join();
  ASSERT_NE(server, nullptr);
  server->Shutdown();
  EXPECT_EQ(code, 0) << err.str();
  EXPECT_THAT(out.str(), HasSubstr("j-done"));
}

// A coordinator that stays down is reported with the connect error, not
// the second try's deadline.
TEST(OneShotCliTest, ACoordinatorThatStaysDownIsReportedAsUnreachable) {
  setenv("XDG_CONFIG_HOME", "/nonexistent-trainctl-test", 1);
  const std::string socket =
      "unix:/tmp/trainctl_no_coordinator_" + std::to_string(getpid()) + ".sock";
  std::vector<const char*> args{"trainctl", "--coordinator", socket.c_str(),
                                "--insecure", "status", "j-done"};
  std::ostringstream out, err;
  EXPECT_NE(RunCli(static_cast<int>(args.size()), args.data(), out, err), 0);
  EXPECT_THAT(err.str(), HasSubstr("failed to connect"));
  EXPECT_THAT(err.str(), ::testing::Not(HasSubstr("Deadline")));
}

}  // namespace
}  // namespace trainctl::client
