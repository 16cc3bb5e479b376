// /metrics text: the exposition-format writer (escaping, values,
// histograms), the cluster metrics derived from jobs and workers, and the
// RPC statistics.

#include <cmath>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "coordinator/http/coordinator_metrics.h"
#include "coordinator/http/prometheus_text.h"
#include "coordinator/http/rpc_stats.h"

namespace trainctl::coordinator::http {
namespace {

bool Has(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos ||
         text.rfind(line + "\n", 0) == 0;
}

TEST(PrometheusText, EscapesLabelsAndHelpAndFormatsValues) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(EscapeHelp("x\\y\nz\"q"), "x\\\\y\\nz\"q");
  EXPECT_EQ(FormatValue(3), "3");
  EXPECT_EQ(FormatValue(-2), "-2");
  EXPECT_EQ(FormatValue(0.25), "0.25");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(0.1), "0.1");
  EXPECT_EQ(std::stod(FormatValue(1.0 / 3)), 1.0 / 3);  // round-trips

  PrometheusText out;
  out.Family("m", "gauge", "Help with \\ and\nnewline.");
  out.Sample({{"a", "x\"y"}, {"b", "z"}}, 1.5);
  out.Sample({}, 2);
  EXPECT_EQ(out.text(),
            "# HELP m Help with \\\\ and\\nnewline.\n# TYPE m gauge\n"
            "m{a=\"x\\\"y\",b=\"z\"} 1.5\nm 2\n");
}

TEST(PrometheusText, HistogramBucketsAreCumulative) {
  PrometheusText out;
  out.Family("h", "histogram", "h");
  out.Histogram({{"method", "M"}}, {0.1, 1}, {2, 3}, 1, 4.5);
  EXPECT_EQ(out.text(),
            "# HELP h h\n# TYPE h histogram\n"
            "h_bucket{method=\"M\",le=\"0.1\"} 2\n"
            "h_bucket{method=\"M\",le=\"1\"} 5\n"
            "h_bucket{method=\"M\",le=\"+Inf\"} 6\n"
            "h_sum{method=\"M\"} 4.5\nh_count{method=\"M\"} 6\n");
}

v1::Job MakeJob(const std::string& id, v1::JobState state, int64_t finished) {
  v1::Job job;
  job.set_id(id);
  job.mutable_spec()->set_name("n \"" + id + "\"");
  job.set_state(state);
  job.set_finished_unix_ms(finished);
  return job;
}

TEST(ClusterMetrics, CountsJobsWorkersSlotsAndShowsRecentJobs) {
  const int64_t now = 1'700'000'000'000;
  std::vector<v1::Job> jobs;
  v1::Job running = MakeJob("job-1", v1::JOB_STATE_RUNNING, 0);
  running.mutable_latest_train()->set_step(40);
  running.mutable_latest_train()->set_epoch(1);
  (*running.mutable_latest_train()->mutable_values())["loss"] = 0.5;
  (*running.mutable_latest_train()->mutable_values())["samples_per_sec"] = 1200;
  (*running.mutable_latest_train()->mutable_values())["lr"] = 0.001;
  (*running.mutable_latest_train()->mutable_values())["step_ms"] = 250;
  (*running.mutable_latest_eval()->mutable_values())["eval_accuracy"] = 0.75;
  (*running.mutable_latest_eval()->mutable_values())["eval_ms"] = 1500;
  (*running.mutable_latest_eval()->mutable_values())["eval_samples"] = 2000;
  running.set_owner("alice");
  running.set_created_unix_ms(now - 7'200'000);
  v1::Transition* start = running.add_transitions();
  start->set_from(v1::JOB_STATE_QUEUED);
  start->set_to(v1::JOB_STATE_RUNNING);
  start->set_time_unix_ms(now - 3'600'000);
  start->set_slots(4);
  running.set_total_steps(100);
  running.set_restarts(2);
  running.set_generation(3);
  running.set_world_size(4);
  jobs.push_back(running);
  jobs.push_back(MakeJob("job-2", v1::JOB_STATE_QUEUED, 0));
  jobs.push_back(MakeJob("job-3", v1::JOB_STATE_SUCCEEDED, now - 60'000));
  // Ended long ago: counted by state, but no per-job series any more.
  jobs.push_back(MakeJob("job-4", v1::JOB_STATE_FAILED,
                         now - kFinishedJobRetentionMs - 1));
  std::vector<v1::WorkerInfo> workers(2);
  workers[0].set_name("w1");
  workers[0].set_slots_total(4);
  workers[0].set_slots_free(0);
  workers[0].set_last_heartbeat_unix_ms(now - 500);
  workers[1].set_name("w2");
  workers[1].set_slots_total(2);
  workers[1].set_slots_free(2);

  PrometheusText out;
  WriteClusterMetrics(jobs, workers, now, out);
  const std::string& t = out.text();
  EXPECT_TRUE(Has(t, "trainctl_jobs{state=\"running\"} 1")) << t;
  EXPECT_TRUE(Has(t, "trainctl_jobs{state=\"queued\"} 1"));
  EXPECT_TRUE(Has(t, "trainctl_jobs{state=\"cancelled\"} 0"));
  EXPECT_TRUE(Has(t, "trainctl_jobs{state=\"preempted\"} 0"));
  EXPECT_TRUE(Has(t, "trainctl_jobs_submitted_total 4"));
  EXPECT_TRUE(Has(t, "trainctl_jobs_finished_total{state=\"failed\"} 1"));
  EXPECT_TRUE(Has(t, "trainctl_workers 2"));
  EXPECT_TRUE(Has(t, "trainctl_slots_total 6"));
  EXPECT_TRUE(Has(t, "trainctl_slots_free 2"));
  EXPECT_TRUE(Has(t, "trainctl_worker_slots_free{worker=\"w1\"} 0"));
  EXPECT_TRUE(Has(t, "trainctl_worker_last_heartbeat_timestamp_seconds"
                     "{worker=\"w1\"} 1699999999.5"));
  EXPECT_TRUE(Has(t, "trainctl_job_info{job=\"job-1\",name=\"n \\\"job-1\\\"\","
                     "owner=\"alice\",state=\"running\"} 1"));
  EXPECT_TRUE(Has(t, "trainctl_job_submitted_timestamp_seconds{job=\"job-1\"} 1699992800"));
  EXPECT_TRUE(Has(t, "trainctl_job_start_timestamp_seconds{job=\"job-1\"} 1699996400"));
  EXPECT_EQ(t.find("trainctl_job_start_timestamp_seconds{job=\"job-2\"}"), std::string::npos);
  EXPECT_TRUE(Has(t, "trainctl_job_slot_seconds_total{job=\"job-1\"} 14400"));
  EXPECT_TRUE(Has(t, "trainctl_job_learning_rate{job=\"job-1\"} 0.001"));
  EXPECT_TRUE(Has(t, "trainctl_job_step_seconds{job=\"job-1\"} 0.25"));
  // Eval results apart from the eval's own time and size.
  EXPECT_TRUE(Has(t, "trainctl_job_eval_seconds{job=\"job-1\"} 1.5"));
  EXPECT_TRUE(Has(t, "trainctl_job_eval_samples{job=\"job-1\"} 2000"));
  EXPECT_EQ(t.find("metric=\"eval_ms\""), std::string::npos);
  EXPECT_EQ(t.find("metric=\"eval_samples\""), std::string::npos);
  EXPECT_TRUE(Has(t, "trainctl_job_step{job=\"job-1\"} 40"));
  EXPECT_TRUE(Has(t, "trainctl_job_total_steps{job=\"job-1\"} 100"));
  EXPECT_TRUE(Has(t, "trainctl_job_epoch{job=\"job-1\"} 1"));
  EXPECT_TRUE(Has(t, "trainctl_job_loss{job=\"job-1\"} 0.5"));
  EXPECT_TRUE(Has(t, "trainctl_job_samples_per_second{job=\"job-1\"} 1200"));
  EXPECT_TRUE(Has(t, "trainctl_job_restarts_total{job=\"job-1\"} 2"));
  EXPECT_TRUE(Has(t, "trainctl_job_generation{job=\"job-1\"} 3"));
  EXPECT_TRUE(Has(t, "trainctl_job_world_size{job=\"job-1\"} 4"));
  EXPECT_TRUE(Has(t, "trainctl_job_eval{job=\"job-1\",metric=\"eval_accuracy\"} 0.75"));
  // A queued job has no loss yet: no sample rather than a made-up 0.
  EXPECT_EQ(t.find("trainctl_job_loss{job=\"job-2\"}"), std::string::npos);
  EXPECT_NE(t.find("trainctl_job_info{job=\"job-3\""), std::string::npos);
  EXPECT_EQ(t.find("job=\"job-4\""), std::string::npos);
}

TEST(ClusterMetrics, BuildInfoNamesTheVersionsAndTheStartTime) {
  PrometheusText out;
  WriteBuildInfo({"0.9.0", "1.51.1", "3.21.12", 1'700'000'000'500}, out);
  EXPECT_TRUE(Has(out.text(), "trainctl_build_info{version=\"0.9.0\",grpc=\"1.51.1\","
                              "protobuf=\"3.21.12\"} 1"))
      << out.text();
  EXPECT_TRUE(Has(out.text(), "trainctl_coordinator_start_time_seconds 1700000000.5"));
}

TEST(RpcStats, CountsByCodeAndTimesUnaryCallsOnly) {
  RpcStats stats;
  stats.Started("/p.S/Get");
  stats.Finished("/p.S/Get", true, 0, 0.003);
  stats.Started("/p.S/Get");
  stats.Finished("/p.S/Get", true, 5, 20);
  stats.Started("/p.S/Stream");
  stats.Started("/p.S/Stream");
  stats.Finished("/p.S/Stream", false, 1, 3600);
  PrometheusText out;
  stats.WriteTo(out);
  const std::string& t = out.text();
  EXPECT_TRUE(Has(t, "trainctl_rpc_requests_total{method=\"/p.S/Get\",code=\"OK\"} 1")) << t;
  EXPECT_TRUE(Has(t, "trainctl_rpc_requests_total{method=\"/p.S/Get\",code=\"NOT_FOUND\"} 1"));
  EXPECT_TRUE(Has(t, "trainctl_rpc_requests_total{method=\"/p.S/Stream\",code=\"CANCELLED\"} 1"));
  EXPECT_TRUE(Has(t, "trainctl_rpc_in_flight{method=\"/p.S/Stream\"} 1"));
  EXPECT_TRUE(Has(t, "trainctl_rpc_in_flight{method=\"/p.S/Get\"} 0"));
  EXPECT_TRUE(Has(t, "trainctl_rpc_duration_seconds_bucket{method=\"/p.S/Get\",le=\"0.001\"} 0"));
  EXPECT_TRUE(Has(t, "trainctl_rpc_duration_seconds_bucket{method=\"/p.S/Get\",le=\"0.005\"} 1"));
  EXPECT_TRUE(Has(t, "trainctl_rpc_duration_seconds_bucket{method=\"/p.S/Get\",le=\"10\"} 1"));
  EXPECT_TRUE(Has(t, "trainctl_rpc_duration_seconds_bucket{method=\"/p.S/Get\",le=\"+Inf\"} 2"));
  EXPECT_TRUE(Has(t, "trainctl_rpc_duration_seconds_count{method=\"/p.S/Get\"} 2"));
  EXPECT_EQ(t.find("trainctl_rpc_duration_seconds_count{method=\"/p.S/Stream\"}"),
            std::string::npos);
}

}  // namespace
}  // namespace trainctl::coordinator::http
