// trainctl's commands on a real cluster (coordinator + two workers on
// loopback): `watch` inside a pseudo-terminal redraws a live view that
// advances to the final state; status, workers, list, cancel and submit
// (--dry-run, --set, --name) in table and JSON form, the JSON read back as
// the documented messages; plot -o FILE.png; list -w. The CLI's own
// answers (certificates, login, typos, completion, version) are in
// cli_usability_test.cc.

#include <gmock/gmock.h>
#include <google/protobuf/struct.pb.h>
#include <google/protobuf/util/json_util.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "local_cluster.h"
#include "pty_run.h"

namespace trainctl::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using std::chrono::seconds;

template <typename Message>
Message FromJson(const std::string& json) {
  Message message;
  auto status = google::protobuf::util::JsonStringToMessage(json, &message);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  return message;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

class CliCommandsTest : public SharedClusterTest {};

TEST_F(CliCommandsTest, WatchInATerminalRedrawsAnAdvancingBarToTheEnd) {
  std::filesystem::create_directories(cluster_->dir() + "/ckpt");
  const std::string spec = cluster_->WriteFile(
      "watch.yaml", SmallJobSpec(2, 8192, 2,
                                 "checkpoint: {dir: " + cluster_->dir() +
                                     "/ckpt}\n"));
  CliResult submit = cluster_->Cli({"submit", spec});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const std::string id = JobIdFrom(submit.output);
  ASSERT_FALSE(id.empty()) << submit.output;

  const PtyResult watch = RunInPty(cluster_->CliArgv({"watch", id}), seconds(300));
  ASSERT_EQ(watch.exit_code, 0) << watch.output;
  // Redrawn in place: cursor up and clear to the end of the screen.
  EXPECT_TRUE(std::regex_search(watch.output, std::regex("\x1b\\[[0-9]+A\x1b\\[J")))
      << watch.output;
  // The bar advanced: several different steps of the total were drawn, the
  // last one the total.
  const v1::Job job = cluster_->GetJob(id);
  ASSERT_EQ(job.state(), v1::JOB_STATE_SUCCEEDED) << job.reason();
  const std::regex step_re("step ([0-9]+)/" + std::to_string(job.total_steps()));
  std::set<int64_t> steps;
  int64_t last_step = -1;
  for (auto it = std::sregex_iterator(watch.output.begin(), watch.output.end(),
                                      step_re);
       it != std::sregex_iterator(); ++it) {
    last_step = std::stoll((*it)[1].str());
    steps.insert(last_step);
  }
  EXPECT_GE(steps.size(), 2u) << watch.output;
  EXPECT_EQ(last_step, job.total_steps()) << watch.output;
  EXPECT_THAT(watch.output, HasSubstr("100%"));
  EXPECT_THAT(watch.output, HasSubstr("loss "));
  // State changes were printed as lines, and the final view says how it
  // ended.
  EXPECT_THAT(watch.output, HasSubstr("QUEUED -> RUNNING: ranks"));
  EXPECT_THAT(watch.output, HasSubstr("RUNNING -> SUCCEEDED"));
  const size_t final_view = watch.output.rfind("\x1b[J");
  ASSERT_NE(final_view, std::string::npos);
  EXPECT_THAT(watch.output.substr(final_view), HasSubstr("SUCCEEDED"));
  // Every rank of the generation was heard from: the start-up is over.
  for (const v1::RankInfo& rank : job.ranks()) EXPECT_TRUE(rank.joined());

  // Not a terminal: plain lines, no escapes.
  CliResult plain = cluster_->Cli({"watch", id});
  EXPECT_EQ(plain.exit_code, 0) << plain.output;
  EXPECT_THAT(plain.output, Not(HasSubstr("\x1b[")));
  EXPECT_THAT(plain.output, HasSubstr("RUNNING -> SUCCEEDED"));

  // status of the finished job: table and JSON.
  CliResult status = cluster_->Cli({"status", id});
  ASSERT_EQ(status.exit_code, 0) << status.output;
  EXPECT_THAT(status.output, HasSubstr("State:       SUCCEEDED"));
  EXPECT_THAT(status.output,
              HasSubstr("Progress:    " + std::to_string(job.total_steps()) + "/" +
                        std::to_string(job.total_steps()) + " (100.0%)"));
  EXPECT_THAT(status.output, HasSubstr("JOINED"));
  for (const v1::RankInfo& rank : job.ranks()) {
    EXPECT_TRUE(std::regex_search(
        status.output,
        std::regex("\n  " + std::to_string(rank.rank()) + " +" + rank.worker() +
                   " +" + rank.host() + " +EXITED +yes")))
        << status.output;
  }
  CliResult status_json = cluster_->Cli({"status", id, "--output", "json"});
  ASSERT_EQ(status_json.exit_code, 0) << status_json.output;
  const v1::Job parsed = FromJson<v1::Job>(status_json.output);
  EXPECT_EQ(parsed.id(), id);
  EXPECT_EQ(parsed.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(parsed.total_steps(), job.total_steps());
  EXPECT_EQ(parsed.ranks_size(), 2);
  EXPECT_TRUE(parsed.ranks(0).joined());

  // checkpoints: one row per cataloged checkpoint, the same in JSON; the
  // last one at the end of training.
  CliResult checkpoints = cluster_->Cli({"checkpoints", id});
  ASSERT_EQ(checkpoints.exit_code, 0) << checkpoints.output;
  const std::vector<std::string> rows = [&] {
    std::vector<std::string> lines;
    std::istringstream in(checkpoints.output);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }();
  ASSERT_GE(rows.size(), 2u) << checkpoints.output;
  EXPECT_TRUE(std::regex_search(
      rows[0],
      std::regex("^STEP +EPOCH +SAMPLES +RANKS +SIZE +BLOCKED +AGE +EVAL +PATH$")))
      << rows[0];
  CliResult checkpoints_json =
      cluster_->Cli({"checkpoints", id, "--output", "json"});
  ASSERT_EQ(checkpoints_json.exit_code, 0) << checkpoints_json.output;
  const auto catalog =
      FromJson<v1::ListCheckpointsResponse>(checkpoints_json.output);
  ASSERT_EQ(catalog.checkpoints_size(), static_cast<int>(rows.size()) - 1);
  const v1::Checkpoint& newest =
      catalog.checkpoints(catalog.checkpoints_size() - 1);
  EXPECT_EQ(newest.step(), job.total_steps());
  EXPECT_EQ(rows.back().rfind(std::to_string(newest.step()) + " ", 0), 0u)
      << rows.back();
  EXPECT_THAT(rows.back(), HasSubstr(newest.path()));
  EXPECT_GT(newest.blocked_ms(), 0);
  char blocked[32];
  std::snprintf(blocked, sizeof(blocked), "%.0f ms", newest.blocked_ms());
  EXPECT_THAT(rows.back(), HasSubstr(blocked));

  // logs --output json: one object per (folded) line, each with its ranks.
  CliResult logs = cluster_->Cli({"logs", id, "--output", "json"});
  ASSERT_EQ(logs.exit_code, 0) << logs.output;
  int log_objects = 0;
  std::istringstream log_lines(logs.output);
  for (std::string line; std::getline(log_lines, line);) {
    const auto object = FromJson<google::protobuf::Struct>(line);
    EXPECT_TRUE(object.fields().count("ranks")) << line;
    EXPECT_TRUE(object.fields().count("text")) << line;
    ++log_objects;
  }
  EXPECT_GT(log_objects, 0);

  // plot -o FILE.png: a PNG of the loss; --output json says what it drew.
  const std::string png_path = cluster_->dir() + "/watch.png";
  CliResult plot = cluster_->Cli({"plot", id, "-o", png_path});
  ASSERT_EQ(plot.exit_code, 0) << plot.output;
  EXPECT_THAT(plot.output, HasSubstr("wrote " + png_path + ": loss ("));
  const std::string png = ReadAll(png_path);
  ASSERT_GT(png.size(), 100u);
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_EQ(png.substr(12, 4), "IHDR");
  CliResult plot_json = cluster_->Cli(
      {"plot", id, "--metric", "loss", "-o", png_path, "--output", "json"});
  ASSERT_EQ(plot_json.exit_code, 0) << plot_json.output;
  const auto drawn = FromJson<google::protobuf::Struct>(plot_json.output);
  EXPECT_EQ(drawn.fields().at("file").string_value(), png_path);
  const auto& series = drawn.fields().at("series").list_value();
  ASSERT_EQ(series.values_size(), 1);
  EXPECT_EQ(series.values(0).struct_value().fields().at("metric").string_value(),
            "loss");
  EXPECT_GT(series.values(0).struct_value().fields().at("points").number_value(),
            1);
}

TEST_F(CliCommandsTest, SubmitDryRunSetAndNameThenWorkersListAndCancel) {
  const std::string spec =
      cluster_->WriteFile("cmds.yaml", SmallJobSpec(2, 1000, 1));
  // --dry-run: where it would run and the shard plan; nothing queued.
  CliResult dry = cluster_->Cli({"submit", spec, "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_TRUE(std::regex_search(
      dry.output, std::regex("Would run: +ranks 0 on w[12], 1 on w[12] "
                             "\\(needs 2 slots; 2 of 2 free on 2 workers\\)")))
      << dry.output;
  EXPECT_THAT(dry.output,
              HasSubstr("Shard plan:  1000 samples per epoch in 15 steps of 64 "
                        "(32 per rank per micro-step); 40 dropped per epoch"));
  EXPECT_THAT(dry.output, HasSubstr("total steps: 15"));
  CliResult dry_json =
      cluster_->Cli({"submit", spec, "--dry-run", "--set", "ranks=4",
                     "--set", "training.batch_size=128", "--output", "json"});
  ASSERT_EQ(dry_json.exit_code, 0) << dry_json.output;
  const auto response = FromJson<v1::SubmitJobResponse>(dry_json.output);
  EXPECT_TRUE(response.job().id().empty());
  EXPECT_EQ(response.plan().ranks(), 4);
  EXPECT_EQ(response.plan().slots_free(), 2);
  EXPECT_EQ(response.plan().slots_total(), 2);
  EXPECT_EQ(response.plan().placement(), "");
  EXPECT_THAT(response.plan().waiting(), HasSubstr("needs 4 slots"));
  EXPECT_EQ(response.plan().steps_per_epoch(), 7);
  EXPECT_EQ(response.plan().per_rank_batch(), 32);
  CliResult list = cluster_->Cli({"list", "--all", "--output", "json"});
  ASSERT_EQ(list.exit_code, 0) << list.output;
  const size_t jobs_before =
      FromJson<v1::ListJobsResponse>(list.output).jobs_size();

  // A --set naming a field the schema does not have: refused by the
  // coordinator, naming it.
  CliResult bad = cluster_->Cli({"submit", spec, "--set", "training.epochz=2"});
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr("training.epochz"));
  EXPECT_THAT(bad.output, HasSubstr("(with --set training.epochz=2)"));
  CliResult malformed = cluster_->Cli({"submit", spec, "--set", "ranks"});
  EXPECT_EQ(malformed.exit_code, 2) << malformed.output;
  EXPECT_THAT(malformed.output, HasSubstr("expected KEY.PATH=VALUE"));

  // --set and --name edit what is submitted. A long job, cancelled below.
  CliResult submit = cluster_->Cli(
      {"submit", spec, "--set", "data.train_limit=60000", "--set",
       "training.epochs=50", "--name", "edited"});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const std::string id = JobIdFrom(submit.output);
  v1::Job job = cluster_->GetJob(id);
  EXPECT_EQ(job.spec().name(), "edited");
  EXPECT_EQ(job.spec().training().epochs(), 50);
  EXPECT_EQ(job.spec().data().train_limit(), 60000);

  // workers while it runs: both busy with one rank each.
  job = cluster_->WaitForJob(
      id, [](const v1::Job& j) { return j.state() != v1::JOB_STATE_QUEUED; },
      seconds(60));
  ASSERT_EQ(job.state(), v1::JOB_STATE_RUNNING) << job.reason();
  CliResult workers = cluster_->Cli({"workers"});
  ASSERT_EQ(workers.exit_code, 0) << workers.output;
  EXPECT_THAT(workers.output,
              HasSubstr("NAME  ADDRESS"));
  for (const v1::RankInfo& rank : job.ranks()) {
    // SLOTS 0/1, GPU SLOTS - (none), DEVICES, LAST HEARTBEAT, RUNNING.
    EXPECT_TRUE(std::regex_search(
        workers.output,
        std::regex(rank.worker() + " +" + rank.host() + " +0/1 +- +[^ ]+ +[0-9]+s ago +" +
                   id + ":" + std::to_string(rank.rank()))))
        << workers.output;
  }
  CliResult workers_json = cluster_->Cli({"workers", "--output", "json"});
  ASSERT_EQ(workers_json.exit_code, 0) << workers_json.output;
  const auto listed = FromJson<v1::ListWorkersResponse>(workers_json.output);
  ASSERT_EQ(listed.workers_size(), 2);
  for (const v1::WorkerInfo& w : listed.workers()) {
    EXPECT_EQ(w.slots_total(), 1);
    EXPECT_EQ(w.slots_free(), 0);
    EXPECT_EQ(w.ranks_size(), 1);
  }

  // list: table and JSON now hold one more job, the edited one RUNNING.
  CliResult table = cluster_->Cli({"list", "--state", "running"});
  ASSERT_EQ(table.exit_code, 0) << table.output;
  EXPECT_TRUE(std::regex_search(table.output,
                                std::regex(id + " +edited +RUNNING +2 ")))
      << table.output;
  list = cluster_->Cli({"list", "--all", "--output", "json"});
  EXPECT_EQ(FromJson<v1::ListJobsResponse>(list.output).jobs_size(),
            static_cast<int>(jobs_before) + 1);

  // cancel: table, then JSON of an already final job is an error (exit 1).
  CliResult cancel = cluster_->Cli({"cancel", id, "--reason", "enough"});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.output;
  EXPECT_EQ(cancel.output, "job " + id + ": CANCELLED (enough)\n");
  CliResult again = cluster_->Cli({"cancel", id, "--output", "json"});
  EXPECT_EQ(again.exit_code, 1) << again.output;
  EXPECT_THAT(again.output, HasSubstr("already ended CANCELLED"));
  CliResult status_json = cluster_->Cli({"status", id, "--output", "json"});
  EXPECT_EQ(FromJson<v1::Job>(status_json.output).state(),
            v1::JOB_STATE_CANCELLED);
}

// Waits (bounded) until the file at `path` matches `pattern`; its text.
std::string WaitForText(const std::string& path, const std::regex& pattern,
                        seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string text;
  while (std::chrono::steady_clock::now() < deadline) {
    text = ReadAll(path);
    if (std::regex_search(text, pattern)) return text;
    usleep(50'000);
  }
  ADD_FAILURE() << "never matched; the output:\n" << text;
  return text;
}

// list -w: the list, then a row per change of a job entering or leaving
// the watched states, in the list's columns; -o json the stream's messages.
TEST_F(CliCommandsTest, ListWatchPrintsTheListThenARowPerChange) {
  const std::string out = cluster_->dir() + "/list-w.out";
  Process watcher(cluster_->CliArgv({"list", "-w", "--state", "queued,running"}), out);
  WaitForText(out, std::regex("^ID +NAME +STATE +RANKS +STEP +AGE +REASON\n"), seconds(30));
  const std::string json_out = cluster_->dir() + "/list-w.json";
  Process json_watcher(cluster_->CliArgv({"list", "-w", "-o", "json"}), json_out);
  WaitForText(json_out, std::regex("\"list_end\":true"), seconds(30));

  const std::string spec = cluster_->WriteFile("watched.yaml", SmallJobSpec(1, 200, 1));
  CliResult submit = cluster_->Cli({"submit", spec, "--name", "watched"});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  const std::string id = JobIdFrom(submit.output);
  const std::string text = WaitForText(
      out, std::regex(id + " +watched +(SUCCEEDED|FAILED)"), seconds(120));
  watcher.Signal(SIGTERM);
  EXPECT_EQ(watcher.Wait(std::chrono::seconds(10)), -SIGTERM);
  // Entered QUEUED, moved to RUNNING, left RUNNING: three rows, in order.
  const size_t queued = text.find(id + "  watched  QUEUED");
  const size_t running = text.find(id + "  watched  RUNNING");
  const size_t ended = text.find(id + "  watched  SUCCEEDED");
  ASSERT_NE(queued, std::string::npos) << text;
  ASSERT_NE(running, std::string::npos) << text;
  ASSERT_NE(ended, std::string::npos) << text;
  EXPECT_LT(queued, running);
  EXPECT_LT(running, ended);

  const std::string json = WaitForText(
      json_out, std::regex("\"id\":\"" + id + "\".*JOB_STATE_SUCCEEDED"), seconds(60));
  json_watcher.Signal(SIGTERM);
  json_watcher.Wait(std::chrono::seconds(10));
  std::istringstream lines(json);
  std::string first;
  std::getline(lines, first);
  EXPECT_TRUE(FromJson<v1::WatchJobsResponse>(first).list_page()) << first;
}

}  // namespace
}  // namespace trainctl::testing
