// The coordinator's HTTP port on a real cluster: /metrics parsed by the
// Prometheus client library's parser (python3-prometheus-client) with the
// job counters moving as a job runs, /healthz, and the dashboard rendered by
// headless Chromium showing the job's points.

#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>

#include <regex>

#include "headless_chromium.h"
#include "http_get.h"
#include "local_cluster.h"

namespace trainctl::testing {
namespace {

using std::chrono::seconds;

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  double value = 0;
};

// A job whose name needs escaping everywhere it is shown: in label values
// (quote, backslash) and in HTML (a tag that would run script if parsed).
constexpr char kNastyName[] =
    R"(<img src=x onerror="document.body.dataset.pwned=1"> a\b & "q")";

std::string NastySpec() {
  std::string spec = SmallJobSpec(2, 3072, 2);
  std::string quoted = "'";
  for (char c : std::string(kNastyName)) quoted += c == '\'' ? "''" : std::string(1, c);
  quoted += "'";
  return "name: " + quoted + spec.substr(spec.find('\n'));
}

class HttpPortTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/trainctl-http-XXXXXX";
    dir_ = mkdtemp(tmpl);
    ClusterOptions options;
    options.coordinator_flags = {"--http-listen", "127.0.0.1:0",
                                 "--http-port-file", dir_ + "/http-port"};
    cluster_ = std::make_unique<LocalCluster>(1, 2, 2, options);
    port_ = ReadPortFile(dir_ + "/http-port");
    ASSERT_GT(port_, 0) << "the coordinator wrote no --http-port-file";
    // The port serves HTTPS with the cluster's certificate; this test reads
    // it as the cluster's admin. Every request and page below follows.
    client_.tls = true;
    client_.ca_file = cluster_->ca_cert_path();
    client_.bearer_token = cluster_->admin_token();
  }

  // GET on the HTTP port as this test's client.
  HttpResult Get(const std::string& target) {
    return HttpGet(port_, target, client_);
  }

  // The dashboard's URL for `path`: https when the port is, the token in
  // the fragment (which the page keeps and the browser never sends).
  std::string PageUrl(const std::string& path) const {
    std::string url = std::string(client_.tls ? "https" : "http") +
                      "://127.0.0.1:" + std::to_string(port_) + path;
    if (!client_.bearer_token.empty()) url += "#token=" + client_.bearer_token;
    return url;
  }

  // Chromium profiles and scrapes are kept for a failed test only.
  void TearDown() override {
    cluster_.reset();
    if (!HasFailure()) std::filesystem::remove_all(dir_);
  }

  std::string Submit(const std::string& spec) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + seconds(10));
    v1::SubmitJobRequest req;
    req.set_spec_text(spec);
    v1::SubmitJobResponse resp;
    grpc::Status s = cluster_->jobs().SubmitJob(&ctx, req, &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp.job().id();
  }

  // GET /metrics, checked by prom_check.py (the Prometheus client's parser
  // plus stricter rules); its samples.
  std::vector<Sample> Scrape() {
    HttpResult r = Get("/metrics");
    EXPECT_EQ(r.status, 200);
    EXPECT_NE(r.headers.find("Content-Type: text/plain; version=0.0.4"),
              std::string::npos)
        << r.headers;
    const std::string text_path = dir_ + "/metrics-" + std::to_string(++scrapes_) + ".txt";
    std::ofstream(text_path) << r.body;
    const std::string out_path = text_path + ".jsonl";
    Process check({"/usr/bin/python3",
                   std::string(TRAINCTL_SOURCE_DIR) + "/tests/integration/prom_check.py",
                   text_path},
                  out_path);
    const int code = check.Wait(seconds(60));
    const std::string out = ReadText(out_path);
    if (out.find("No module named 'prometheus_client'") != std::string::npos) {
      ADD_FAILURE() << "python3-prometheus-client is missing; run "
                       "deploy/install-deps.sh";
      return {};
    }
    EXPECT_EQ(code, 0) << out << "\n--- the scraped text ---\n" << r.body;
    std::vector<Sample> samples;
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);) {
      google::protobuf::Struct s;
      if (!google::protobuf::util::JsonStringToMessage(line, &s).ok()) continue;
      Sample sample;
      sample.name = s.fields().at("name").string_value();
      for (const auto& [k, v] : s.fields().at("labels").struct_value().fields()) {
        sample.labels[k] = v.string_value();
      }
      const auto& value = s.fields().at("value");
      sample.value = value.has_string_value() ? std::nan("") : value.number_value();
      samples.push_back(std::move(sample));
    }
    EXPECT_FALSE(samples.empty()) << out;
    return samples;
  }

  std::string dir_;
  std::unique_ptr<LocalCluster> cluster_;
  int port_ = 0;
  HttpClientOptions client_;
  int scrapes_ = 0;
};

// The value of the one series with exactly these labels, if present.
std::optional<double> Value(const std::vector<Sample>& samples,
                            const std::string& name,
                            const std::map<std::string, std::string>& labels = {}) {
  for (const Sample& s : samples) {
    if (s.name == name && s.labels == labels) return s.value;
  }
  return std::nullopt;
}

TEST_F(HttpPortTest, MetricsParseAndJobCountersMoveWhileAJobRuns) {
  // Probes need no token.
  HttpClientOptions probe = client_;
  probe.bearer_token.clear();
  HttpResult health = HttpGet(port_, "/healthz", probe);
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body, "ok\n");

  std::vector<Sample> before = Scrape();
  EXPECT_EQ(Value(before, "trainctl_workers"), 1);
  EXPECT_EQ(Value(before, "trainctl_slots_total"), 2);
  EXPECT_EQ(Value(before, "trainctl_slots_free"), 2);
  EXPECT_EQ(Value(before, "trainctl_jobs_submitted_total"), 0);
  EXPECT_EQ(Value(before, "trainctl_jobs", {{"state", "running"}}), 0);

  const std::string id = Submit(NastySpec());
  ASSERT_FALSE(id.empty());
  v1::Job job = cluster_->WaitForJob(
      id,
      [](const v1::Job& j) {
        return j.latest_train().step() > 0 ||
               (j.state() != v1::JOB_STATE_QUEUED &&
                j.state() != v1::JOB_STATE_RUNNING);
      },
      seconds(120));
  ASSERT_EQ(job.state(), v1::JOB_STATE_RUNNING) << job.reason();
  std::vector<Sample> during = Scrape();
  EXPECT_EQ(Value(during, "trainctl_jobs", {{"state", "running"}}), 1);
  EXPECT_EQ(Value(during, "trainctl_jobs_submitted_total"), 1);
  EXPECT_EQ(Value(during, "trainctl_slots_free"), 0);
  // The name label round-trips through escaping and the parser unchanged.
  EXPECT_EQ(Value(during, "trainctl_job_info",
                  {{"job", id}, {"name", kNastyName}, {"owner", job.owner()},
                   {"state", "running"}}),
            1);
  EXPECT_GT(Value(during, "trainctl_job_start_timestamp_seconds", {{"job", id}}).value_or(0), 0);
  int build_infos = 0;  // the versions main.cc was built with, not "unknown"
  for (const Sample& s : during) {
    if (s.name != "trainctl_build_info") continue;
    ++build_infos;
    EXPECT_EQ(s.labels.at("version"), TRAINCTL_VERSION);
    EXPECT_NE(s.labels.at("grpc"), "unknown");
    EXPECT_NE(s.labels.at("protobuf"), "unknown");
  }
  EXPECT_EQ(build_infos, 1);
  EXPECT_GT(Value(during, "trainctl_job_step", {{"job", id}}).value_or(0), 0);
  EXPECT_TRUE(Value(during, "trainctl_job_loss", {{"job", id}}).has_value());
  EXPECT_EQ(Value(during, "trainctl_job_world_size", {{"job", id}}), 2);

  job = cluster_->WaitForJob(
      id, [](const v1::Job& j) { return j.state() == v1::JOB_STATE_SUCCEEDED ||
                                        j.state() == v1::JOB_STATE_FAILED; },
      seconds(300));
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.reason();
  std::vector<Sample> after = Scrape();
  EXPECT_EQ(Value(after, "trainctl_jobs", {{"state", "running"}}), 0);
  EXPECT_EQ(Value(after, "trainctl_jobs", {{"state", "succeeded"}}), 1);
  EXPECT_EQ(Value(after, "trainctl_jobs_finished_total", {{"state", "succeeded"}}), 1);
  EXPECT_EQ(Value(after, "trainctl_slots_free"), 2);
  EXPECT_EQ(Value(after, "trainctl_job_step", {{"job", id}}), job.total_steps());
  EXPECT_EQ(Value(after, "trainctl_job_total_steps", {{"job", id}}), job.total_steps());
  EXPECT_EQ(Value(after, "trainctl_job_restarts_total", {{"job", id}}), 0);
  EXPECT_EQ(Value(after, "trainctl_job_generation", {{"job", id}}), 1);
  const double accuracy = Value(after, "trainctl_job_eval",
                                {{"job", id}, {"metric", "eval_accuracy"}})
                              .value_or(-1);
  EXPECT_GT(accuracy, 0.3);  // Fashion-MNIST MLP after 2 epochs
  EXPECT_LE(accuracy, 1.0);
  EXPECT_GT(Value(after, "trainctl_job_samples_per_second", {{"job", id}}).value_or(0), 0);
  // A schedule may have decayed the lr to 0 at the last step.
  EXPECT_GE(Value(after, "trainctl_job_learning_rate", {{"job", id}}).value_or(-1), 0);
  EXPECT_GT(Value(after, "trainctl_job_step_seconds", {{"job", id}}).value_or(0), 0);
  EXPECT_GT(Value(after, "trainctl_job_slot_seconds_total", {{"job", id}}).value_or(0), 0);
  EXPECT_GT(Value(after, "trainctl_job_eval_seconds", {{"job", id}}).value_or(0), 0);
  EXPECT_FALSE(Value(after, "trainctl_job_eval", {{"job", id}, {"metric", "eval_ms"}}));
  // RPCs: our one submit, and the GetJob polls timed in the histogram.
  EXPECT_EQ(Value(after, "trainctl_rpc_requests_total",
                  {{"method", "/trainctl.v1.Jobs/SubmitJob"}, {"code", "OK"}}),
            1);
  EXPECT_GE(Value(after, "trainctl_rpc_duration_seconds_count",
                  {{"method", "/trainctl.v1.Jobs/GetJob"}}).value_or(0),
            2);
  EXPECT_EQ(Value(after, "trainctl_rpc_in_flight",
                  {{"method", "/trainctl.v1.Workers/Connect"}}),
            1);  // the worker's stream
}

// ---- the dashboard in headless Chromium ----

// What the chart of `key` (in `kind` metrics) must show: distinct steps
// with a finite value, and the last step.
std::pair<int, int64_t> Expected(const std::vector<v1::JobEvent>& events,
                                 const std::string& kind,
                                 const std::string& key) {
  std::set<int64_t> steps;
  for (const v1::JobEvent& e : events) {
    if (!e.has_metric() || e.metric().kind() != kind) continue;
    auto it = e.metric().values().find(key);
    if (it != e.metric().values().end() && std::isfinite(it->second)) {
      steps.insert(e.metric().step());
    }
  }
  return {static_cast<int>(steps.size()), steps.empty() ? -1 : *steps.rbegin()};
}

TEST_F(HttpPortTest, DashboardChartsShowTheJobsPoints) {
  if (const std::string why = ChromiumUnusableReason(dir_); !why.empty()) {
    GTEST_SKIP() << why;
  }
  bool ok = false;

  const std::string id = Submit(NastySpec());
  ASSERT_FALSE(id.empty());
  v1::Job job = cluster_->WaitForJob(
      id, [](const v1::Job& j) { return j.state() == v1::JOB_STATE_SUCCEEDED ||
                                        j.state() == v1::JOB_STATE_FAILED; },
      seconds(300));
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.reason();
  const std::vector<v1::JobEvent> events = cluster_->Events(id);

  const std::string dom = DumpDom(dir_, PageUrl("/jobs/" + id), 10'000, &ok);
  ASSERT_TRUE(ok) << dom;
  // Every API call was answered (with the token, where one is needed).
  EXPECT_NE(dom.find("data-auth=\"ok\""), std::string::npos) << dom;
  EXPECT_EQ(dom.find("id=\"token-prompt\""), std::string::npos);
  // The page caught up with the whole history and saw the final state.
  EXPECT_NE(dom.find("data-events-closed=\"true\""), std::string::npos) << dom;
  EXPECT_NE(dom.find("data-state=\"succeeded\""), std::string::npos);
  EXPECT_NE(dom.find("data-next-seq=\"" + std::to_string(events.size() + 1) + "\""),
            std::string::npos);

  const auto [loss_points, last_step] = Expected(events, "train", "loss");
  ASSERT_GE(loss_points, 5) << "too few train metrics to chart";
  EXPECT_EQ(last_step, job.total_steps());
  EXPECT_EQ(Attribute(dom, "chart-loss", "data-points"), std::to_string(loss_points));
  EXPECT_EQ(Attribute(dom, "chart-loss", "data-last-step"), std::to_string(last_step));
  const auto [rate_points, rate_last] = Expected(events, "train", "samples_per_sec");
  EXPECT_EQ(Attribute(dom, "chart-throughput", "data-points"),
            std::to_string(rate_points));
  EXPECT_EQ(Attribute(dom, "chart-throughput", "data-last-step"),
            std::to_string(rate_last));
  const auto [eval_points, eval_last] = Expected(events, "eval", "eval_accuracy");
  EXPECT_EQ(eval_points, 2);  // one per epoch
  EXPECT_EQ(Attribute(dom, "chart-accuracy", "data-points"), std::to_string(eval_points));
  EXPECT_EQ(Attribute(dom, "chart-accuracy", "data-last-step"), std::to_string(eval_last));
  const auto [lr_points, lr_last] = Expected(events, "train", "lr");
  EXPECT_EQ(Attribute(dom, "chart-lr", "data-points"), std::to_string(lr_points));
  // One polyline vertex per point.
  const size_t poly = dom.find(" points=\"", dom.find("<polyline", dom.find("id=\"chart-loss\"")));
  ASSERT_NE(poly, std::string::npos);
  const std::string coords = dom.substr(poly + 9, dom.find('"', poly + 9) - poly - 9);
  EXPECT_EQ(static_cast<int>(std::count(coords.begin(), coords.end(), ',')),
            loss_points);
  // Ranks and log lines are there; the name was shown as text, not markup.
  EXPECT_NE(dom.find("<td>w1</td>"), std::string::npos);
  int logs = 0;
  for (const auto& e : events) logs += e.has_log();
  if (logs > 0) {
    EXPECT_NE(dom.find("[rank "), std::string::npos);
  }
  EXPECT_NE(dom.find("&lt;img src=x"), std::string::npos) << dom;
  EXPECT_EQ(dom.find("<img"), std::string::npos);
  EXPECT_EQ(dom.find("data-pwned"), std::string::npos);

  // The compare view: the job twice, a line each in every chart, a legend.
  const std::string compare =
      DumpDom(dir_, PageUrl("/compare?jobs=" + id + "," + id), 10'000, &ok);
  ASSERT_TRUE(ok) << compare;
  EXPECT_NE(compare.find("data-compared=\"2\""), std::string::npos) << compare;
  EXPECT_EQ(Attribute(compare, "chart-loss", "data-points"), std::to_string(loss_points));
  const size_t loss_chart = compare.find("id=\"chart-loss\"");
  const std::string loss_html =
      compare.substr(loss_chart, compare.find("id=\"chart-eval_accuracy\"") - loss_chart);
  const std::regex line("<polyline class=\"series\"");
  EXPECT_EQ(std::distance(std::sregex_iterator(loss_html.begin(), loss_html.end(), line),
                          std::sregex_iterator()),
            2)
      << loss_html;
  EXPECT_NE(loss_html.find("class=\"legend\""), std::string::npos);
  EXPECT_EQ(compare.find("<img"), std::string::npos);

  // The job list shows the job, escaped the same way.
  const std::string list = DumpDom(dir_, PageUrl("/"), 5'000, &ok);
  ASSERT_TRUE(ok) << list;
  EXPECT_NE(list.find("data-job=\"" + id + "\""), std::string::npos) << list;
  EXPECT_NE(list.find("data-jobs=\"1\""), std::string::npos);
  EXPECT_NE(list.find("&lt;img src=x"), std::string::npos);
  EXPECT_EQ(list.find("<img"), std::string::npos);
  EXPECT_EQ(list.find("data-pwned"), std::string::npos);

  // One evaluation: its chart names its step once (it printed
  // "step 40step 40", a start and an end label on the same step).
  const std::string single = Submit(SmallJobSpec(1, 1024, 1));
  ASSERT_FALSE(single.empty());
  ASSERT_EQ(cluster_->WaitForJob(single, [](const v1::Job& j) {
                return j.state() == v1::JOB_STATE_SUCCEEDED || j.state() == v1::JOB_STATE_FAILED;
              }, seconds(300)).state(), v1::JOB_STATE_SUCCEEDED);
  const auto [single_points, single_step] =
      Expected(cluster_->Events(single), "eval", "eval_accuracy");
  ASSERT_EQ(single_points, 1);
  const std::string one = DumpDom(dir_, PageUrl("/jobs/" + single), 10'000, &ok);
  ASSERT_TRUE(ok) << one;
  const size_t chart = one.find("id=\"chart-accuracy\"");
  ASSERT_NE(chart, std::string::npos) << one;
  const std::string chart_html = one.substr(chart, one.find("id=\"chart-", chart + 10) - chart);
  const std::string label = ">step " + std::to_string(single_step) + "<";
  const std::regex step_label(">step [0-9]+<");
  EXPECT_EQ(std::distance(std::sregex_iterator(chart_html.begin(), chart_html.end(), step_label),
                          std::sregex_iterator()),
            1)
      << chart_html;
  EXPECT_NE(chart_html.find(label), std::string::npos) << chart_html;
}

}  // namespace
}  // namespace trainctl::testing
