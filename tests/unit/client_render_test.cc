// Renderers and formatting helpers of trainctl: exact output pieces for
// hand-built protos, plus the exit-code mapping.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <sstream>

#include "client/commands.h"
#include "client/config.h"
#include "client/format.h"
#include "client/version_command.h"
#include "client/render.h"

namespace trainctl::client {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// 2023-11-14 22:13:20 UTC.
constexpr int64_t kT0 = 1'700'000'000'000;

RenderContext Ctx(int64_t now_ms = kT0 + 303'000) {
  RenderContext ctx;
  ctx.now_unix_ms = now_ms;
  ctx.tz = absl::UTCTimeZone();
  return ctx;
}

v1::Job QueuedJob() {
  v1::Job job;
  job.set_id("j-0001");
  job.mutable_spec()->set_name("mnist-mlp");
  job.mutable_spec()->set_ranks(4);
  job.mutable_spec()->mutable_model()->set_type("mlp");
  job.mutable_spec()->mutable_model()->add_hidden(256);
  job.mutable_spec()->mutable_model()->add_hidden(128);
  job.mutable_spec()->mutable_training()->set_batch_size(256);
  job.mutable_spec()->mutable_training()->set_epochs(3);
  job.mutable_spec()->mutable_optimizer()->set_type("adamw");
  job.mutable_spec()->mutable_optimizer()->set_lr(0.001);
  job.set_state(v1::JOB_STATE_QUEUED);
  job.set_pending_reason("needs 4 slots; 2 of 2 registered slots free");
  job.set_created_unix_ms(kT0);
  job.set_generation(1);
  v1::Transition* t = job.add_transitions();
  t->set_to(v1::JOB_STATE_QUEUED);
  t->set_time_unix_ms(kT0);
  t->set_reason("submitted");
  return job;
}

v1::Job RunningJob() {
  v1::Job job = QueuedJob();
  job.set_id("j-0002");
  job.set_state(v1::JOB_STATE_RUNNING);
  job.set_pending_reason("");
  job.set_reason("ranks assigned");
  job.set_total_steps(1000);
  job.set_started_unix_ms(kT0 + 1000);
  v1::MetricPoint* m = job.mutable_latest_train();
  m->set_step(120);
  m->set_epoch(1);
  m->set_kind("train");
  (*m->mutable_values())["loss"] = 0.43214;
  (*m->mutable_values())["lr"] = 0.001;
  v1::RankInfo* r = job.add_ranks();
  r->set_rank(0);
  r->set_worker("w1");
  r->set_host("node-a");
  r->set_state(v1::RANK_STATE_RUNNING);
  v1::RankInfo* r1 = job.add_ranks();
  r1->set_rank(1);
  r1->set_worker("w2");
  r1->set_host("node-b");
  r1->set_state(v1::RANK_STATE_EXITED);
  r1->set_exit_code(137);
  return job;
}

TEST(FormatTest, StateNamesRoundTrip) {
  EXPECT_EQ(StateName(v1::JOB_STATE_QUEUED), "QUEUED");
  EXPECT_EQ(StateName(v1::JOB_STATE_CANCELLED), "CANCELLED");
  EXPECT_EQ(StateName(v1::JOB_STATE_UNSPECIFIED), "UNKNOWN");
  EXPECT_EQ(*ParseStateName("running"), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(*ParseStateName("JOB_STATE_FAILED"), v1::JOB_STATE_FAILED);
  EXPECT_EQ(ParseStateName("done").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(FormatTest, Durations) {
  EXPECT_EQ(FormatDurationShort(absl::Milliseconds(-5)), "0s");
  EXPECT_EQ(FormatDurationShort(absl::Seconds(42)), "42s");
  EXPECT_EQ(FormatDurationShort(absl::Seconds(303)), "5m03s");
  EXPECT_EQ(FormatDurationShort(absl::Minutes(125)), "2h05m");
  EXPECT_EQ(FormatDurationShort(absl::Hours(76)), "3d04h");
  EXPECT_EQ(FormatAge(0, kT0), "-");
  EXPECT_EQ(FormatClock(kT0 + 1000, absl::UTCTimeZone()), "22:13:21");
}

TEST(FormatTest, ExitCodes) {
  EXPECT_EQ(ExitCodeForStatus(absl::OkStatus()), 0);
  EXPECT_EQ(ExitCodeForStatus(absl::InternalError("x")), 1);
  EXPECT_EQ(ExitCodeForStatus(absl::FailedPreconditionError("x")), 1);
  EXPECT_EQ(ExitCodeForStatus(absl::InvalidArgumentError("x")), 2);
  EXPECT_EQ(ExitCodeForStatus(absl::UnavailableError("x")), 3);
  EXPECT_EQ(ExitCodeForStatus(absl::DeadlineExceededError("x")), 3);
  EXPECT_EQ(ExitCodeForStatus(absl::NotFoundError("x")), 4);
  EXPECT_EQ(ExitCodeForState(v1::JOB_STATE_SUCCEEDED), 0);
  EXPECT_EQ(ExitCodeForState(v1::JOB_STATE_FAILED), 1);
  EXPECT_EQ(ExitCodeForState(v1::JOB_STATE_CANCELLED), 1);
  EXPECT_TRUE(IsFinalState(v1::JOB_STATE_CANCELLED));
  EXPECT_FALSE(IsFinalState(v1::JOB_STATE_RUNNING));
}

TEST(FormatTest, UnreachableMessageNamesAddressAndAdvice) {
  const std::string msg = DescribeError(
      absl::UnavailableError("failed to connect"), "10.0.0.5:7070");
  EXPECT_THAT(msg, HasSubstr("10.0.0.5:7070"));
  EXPECT_THAT(msg, HasSubstr("is trainctl-coordinator running?"));
  EXPECT_THAT(msg, HasSubstr("--coordinator or TRAINCTL_COORDINATOR"));
  EXPECT_EQ(DescribeError(absl::NotFoundError("no job j-9"), "x"),
            "NOT_FOUND: no job j-9");
}

TEST(FormatTest, UntrustedCertificateAndRefusedConnectionAreToldApart) {
  const std::string untrusted = DescribeError(
      absl::UnavailableError("failed to connect to all addresses; last error: "
                             "UNKNOWN: ipv4:127.0.0.1:7070: Ssl handshake failed: "
                             "SSL_ERROR_SSL: error:0A000086:SSL routines::certificate "
                             "verify failed"),
      "127.0.0.1:7070");
  EXPECT_THAT(untrusted, HasSubstr("the coordinator at 127.0.0.1:7070 answered"));
  EXPECT_THAT(untrusted, HasSubstr("--ca-cert"));
  EXPECT_THAT(untrusted, Not(HasSubstr("is trainctl-coordinator running")));
  const std::string refused = DescribeError(
      absl::UnavailableError("failed to connect to all addresses; last error: "
                             "UNKNOWN: ipv4:127.0.0.1:7999: Failed to connect to "
                             "remote host: Connection refused"),
      "127.0.0.1:7999");
  EXPECT_THAT(refused, HasSubstr("nothing listens there (connection refused)"));
  EXPECT_LT(refused.size(), 250u);  // one readable line, not four guesses
}

TEST(FormatTest, TruncateAndTable) {
  EXPECT_EQ(Truncate("short", 10), "short");
  EXPECT_EQ(Truncate("0123456789abc", 10), "0123456...");
  EXPECT_EQ(Truncate("a\nb", 10), "a b");
  EXPECT_EQ(RenderTable({"A", "BB"}, {{"xyz", "1"}, {"", "22"}}),
            "A    BB\n"
            "xyz  1\n"
            "     22\n");
}

TEST(FormatTest, MetricValuesKnownKeysFirstThenSorted) {
  v1::MetricPoint m;
  (*m.mutable_values())["zeta"] = 2;
  (*m.mutable_values())["samples_per_sec"] = 5230.14;
  (*m.mutable_values())["lr"] = 0.001;
  (*m.mutable_values())["grad_norm"] = 1.25;
  (*m.mutable_values())["loss"] = 0.43214;
  EXPECT_EQ(FormatMetricValues(m),
            "loss 0.4321 lr 0.001 samples/s 5230.1 grad_norm 1.25 zeta 2");
}

// A train point as the ranks report it: the readable part by default, the
// rest with --wide.
TEST(FormatTest, TrainAndEvalLinesShowWhatAPersonReadsUnlessWide) {
  v1::MetricPoint train;
  train.set_kind("train");
  for (const auto& [key, value] : std::map<std::string, double>{
           {"loss", 0.5907}, {"lr", 0.002}, {"samples_per_sec", 4689.8},
           {"step_ms", 27.29}, {"step_ms_max", 27.3}, {"step_ms_min", 27.29},
           {"comm_ms", 4.331}, {"comm_ms_max", 5.022}, {"comm_ms_min", 3.64},
           {"compute_ms", 22.05}, {"compute_ms_max", 22.7}, {"compute_ms_min", 21.4},
           {"data_ms", 0.17}, {"grad_norm", 1.538}, {"slowest_rank", 1}}) {
    (*train.mutable_values())[key] = value;
  }
  EXPECT_EQ(FormatMetricValues(train, /*wide=*/false),
            "loss 0.5907 lr 0.002 samples/s 4689.8 step_ms 27.29 grad_norm 1.538");
  EXPECT_THAT(FormatMetricValues(train, /*wide=*/true), HasSubstr("comm_ms_max 5.022"));
  // A rank computing 40% longer than another: the spread is shown.
  (*train.mutable_values())["compute_ms_max"] = 30.0;
  EXPECT_EQ(FormatMetricValues(train, false),
            "loss 0.5907 lr 0.002 samples/s 4689.8 step_ms 27.29 grad_norm 1.538 "
            "compute_ms 21.4-30");
  v1::MetricPoint eval;
  eval.set_kind("eval");
  for (const auto& [key, value] : std::map<std::string, double>{
           {"eval_accuracy", 0.8476}, {"eval_loss", 0.4204}, {"eval_loss_max", 0.4291},
           {"eval_ms", 1380}, {"eval_ms_max", 1434}}) {
    (*eval.mutable_values())[key] = value;
  }
  EXPECT_EQ(FormatMetricValues(eval, false), "eval_accuracy 0.8476 eval_loss 0.4204");
  // The macro F1 and top-5 are headline results; per-class scores and the
  // precision and recall behind the F1 wait for --wide.
  v1::MetricPoint scored = eval;
  for (const auto& [key, value] : std::map<std::string, double>{
           {"eval_f1", 0.84812}, {"eval_precision", 0.8501}, {"eval_recall", 0.8476},
           {"eval_f1_3", 0.9}, {"eval_top5_accuracy", 0.99591}}) {
    (*scored.mutable_values())[key] = value;
  }
  EXPECT_EQ(FormatMetricValues(scored, false),
            "eval_accuracy 0.8476 eval_f1 0.8481 eval_loss 0.4204 "
            "eval_top5_accuracy 0.9959");
  EXPECT_THAT(FormatMetricValues(scored, true), HasSubstr("eval_f1_3 0.9"));
  EXPECT_THAT(FormatMetricValues(scored, true), HasSubstr("eval_precision 0.8501"));
  // The event line follows the context's --wide.
  v1::JobEvent event;
  *event.mutable_metric() = train;
  RenderContext wide = Ctx();
  wide.wide = true;
  EXPECT_THAT(RenderEventLine(event, 0, Ctx()), Not(HasSubstr("comm_ms")));
  EXPECT_THAT(RenderEventLine(event, 0, wide), HasSubstr("comm_ms 4.331"));
  // Checkpoints: the EVAL column holds results, not timings.
  v1::ListCheckpointsResponse checkpoints;
  v1::Checkpoint* c = checkpoints.add_checkpoints();
  c->set_step(100);
  c->set_path("/ckpt/job-1/step-100.ckpt");
  c->mutable_metrics()->insert(eval.values().begin(), eval.values().end());
  c->set_blocked_ms(104.4);
  c->set_write_ms(4824);
  const std::string table = RenderCheckpointTable(checkpoints, Ctx());
  EXPECT_THAT(table, HasSubstr("eval_accuracy=0.8476 eval_loss=0.4204"));
  // How long training stood still for it.
  EXPECT_THAT(table, HasSubstr("SIZE    BLOCKED  AGE"));
  EXPECT_THAT(table, HasSubstr("0.0 MB  104 ms"));
  EXPECT_THAT(table, Not(HasSubstr("eval_ms")));
  EXPECT_THAT(RenderCheckpointTable(checkpoints, wide), HasSubstr("eval_ms=1380"));
}

TEST(RenderTest, JobTableColumnsAndReasons) {
  v1::ListJobsResponse response;
  *response.add_jobs() = QueuedJob();
  *response.add_jobs() = RunningJob();
  const std::string table = RenderJobTable(response, Ctx());
  EXPECT_EQ(table.substr(0, table.find('\n')),
            "ID      NAME       STATE    RANKS  STEP      AGE    REASON");
  // QUEUED shows what it waits for; RUNNING shows its reason and progress.
  EXPECT_THAT(table,
              HasSubstr("j-0001  mnist-mlp  QUEUED   4      -         5m03s  "
                        "needs 4 slots; 2 of 2 registered slots free\n"));
  EXPECT_THAT(table, HasSubstr("j-0002  mnist-mlp  RUNNING  4      120/1000  "
                               "5m03s  ranks assigned\n"));
}

TEST(RenderTest, JobTableTruncatesLongReasons) {
  v1::ListJobsResponse response;
  v1::Job* job = response.add_jobs();
  *job = RunningJob();
  job->set_reason(std::string(200, 'x'));
  const std::string table = RenderJobTable(response, Ctx());
  EXPECT_THAT(table, HasSubstr(std::string(57, 'x') + "...\n"));
  EXPECT_THAT(table, Not(HasSubstr(std::string(58, 'x'))));
}

TEST(RenderTest, StatusOfQueuedJobShowsWaitingReason) {
  const std::string s = RenderJobStatus(QueuedJob(), Ctx());
  EXPECT_THAT(s, HasSubstr("State:       QUEUED\n"
                           "Waiting:     needs 4 slots; 2 of 2 registered "
                           "slots free\n"));
  EXPECT_THAT(s, HasSubstr("Model:       mlp hidden [256,128]\n"));
  EXPECT_THAT(s, HasSubstr("Batch:       256 global, 64 per rank\n"));
  EXPECT_THAT(s, HasSubstr("Optimizer:   adamw lr 0.001\n"));
  EXPECT_THAT(s, HasSubstr("Created:     2023-11-14 22:13:20 (5m03s ago)\n"));
  EXPECT_THAT(s, HasSubstr("2023-11-14 22:13:20  -     QUEUED  submitted\n"));
}

TEST(RenderTest, StatusOfRunningJobShowsRanksAndMetrics) {
  const std::string s = RenderJobStatus(RunningJob(), Ctx());
  EXPECT_THAT(s, Not(HasSubstr("Waiting:")));
  EXPECT_THAT(s, HasSubstr("Reason:      ranks assigned\n"));
  EXPECT_THAT(s, HasSubstr("Progress:    120/1000 (12.0%)\n"));
  EXPECT_THAT(s, HasSubstr("Train:       loss 0.4321 lr 0.001 (step 120"));
  EXPECT_THAT(s, HasSubstr("  RANK  WORKER  HOST    STATE    JOINED  STEP  PHASE  "
                           "EXIT  MESSAGE\n"
                           "  0     w1      node-a  RUNNING  no      -     -      -\n"
                           "  1     w2      node-b  EXITED   no      -     -      "
                           "137\n"));
}

TEST(RenderTest, EventLines) {
  v1::JobEvent transition;
  transition.set_seq(2);
  transition.mutable_transition()->set_from(v1::JOB_STATE_QUEUED);
  transition.mutable_transition()->set_to(v1::JOB_STATE_RUNNING);
  transition.mutable_transition()->set_time_unix_ms(kT0 + 1000);
  transition.mutable_transition()->set_reason("ranks assigned");
  EXPECT_EQ(RenderEventLine(transition, 0, Ctx()),
            "22:13:21 QUEUED -> RUNNING: ranks assigned");

  v1::JobEvent train;
  train.set_seq(3);
  train.set_time_unix_ms(kT0 + 5000);
  train.mutable_metric()->set_kind("train");
  train.mutable_metric()->set_step(120);
  train.mutable_metric()->set_epoch(1);
  (*train.mutable_metric()->mutable_values())["loss"] = 0.43214;
  (*train.mutable_metric()->mutable_values())["samples_per_sec"] = 812.0;
  EXPECT_EQ(RenderEventLine(train, 1000, Ctx()),
            "22:13:25 train step 120/1000 epoch 2 loss 0.4321 samples/s 812.0");

  v1::JobEvent eval;
  eval.mutable_metric()->set_kind("eval");
  eval.mutable_metric()->set_step(500);
  eval.mutable_metric()->set_time_unix_ms(kT0);
  (*eval.mutable_metric()->mutable_values())["accuracy"] = 0.97123;
  EXPECT_EQ(RenderEventLine(eval, 1000, Ctx()),
            "22:13:20 eval step 500 epoch 1 accuracy 0.9712");

  v1::JobEvent log;
  log.mutable_log()->set_rank(3);
  log.mutable_log()->set_text("loading shard 3/4\n");
  EXPECT_EQ(RenderEventLine(log, 0, Ctx()), "[rank 3] loading shard 3/4");
}

TEST(RenderTest, SpecErrorsOnePerLine) {
  EXPECT_EQ(RenderSpecErrors("job.yaml",
                             "optimizer.lr: must be > 0; ranks: unknown field"),
            "invalid job spec job.yaml:\n"
            "  optimizer.lr: must be > 0\n"
            "  ranks: unknown field\n");
}

TEST(RenderTest, JsonKeepsProtoNamesAndZeroFields) {
  v1::JobEvent event;
  event.set_job_id("j-1");
  const std::string json = ToJson(event, /*pretty=*/false);
  EXPECT_THAT(json, HasSubstr("\"job_id\":\"j-1\""));
  EXPECT_THAT(json, HasSubstr("\"seq\":\"0\""));
  EXPECT_EQ(json.find('\n'), std::string::npos);
}

// Moved from ResolveCoordinatorAddress to ResolveSettings when the config
// file joined the precedence chain; the same cases still hold.
TEST(CliTest, CoordinatorAddressPrecedence) {
  auto address = [](const std::string& flag, const char* env) {
    std::map<std::string, std::string> vars;
    if (env != nullptr) vars["TRAINCTL_COORDINATOR"] = env;
    return ResolveSettings(flag, "", vars, ConfigFile{})->coordinator;
  };
  EXPECT_EQ(address("a:1", "b:2"), "a:1");
  EXPECT_EQ(address("", "b:2"), "b:2");
  EXPECT_EQ(address("", ""), "127.0.0.1:7070");
  EXPECT_EQ(address("", nullptr), "127.0.0.1:7070");
}

int RunTrainctl(std::vector<const char*> args, std::string* out_text,
                std::string* err_text) {
  args.insert(args.begin(), "trainctl");
  std::ostringstream out, err;
  const int code = RunCli(static_cast<int>(args.size()), args.data(), out, err);
  *out_text = out.str();
  *err_text = err.str();
  return code;
}

TEST(CliTest, UsageErrorsExitTwoWithoutContactingServer) {
  std::string out, err;
  EXPECT_EQ(RunTrainctl({}, &out, &err), 2);
  EXPECT_EQ(RunTrainctl({"frobnicate"}, &out, &err), 2);
  EXPECT_EQ(RunTrainctl({"status"}, &out, &err), 2);
  EXPECT_EQ(RunTrainctl({"list", "--output", "yaml"}, &out, &err), 2);
  EXPECT_EQ(
      RunTrainctl({"submit", "x.yaml", "--follow", "--dry-run"}, &out, &err),
      2);
  EXPECT_EQ(RunTrainctl({"list", "--state", "done"}, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("unknown job state 'done'"));
  EXPECT_EQ(RunTrainctl({"submit", "/nonexistent/job.yaml"}, &out, &err), 2);
  EXPECT_THAT(err, HasSubstr("cannot read job spec /nonexistent/job.yaml"));
}

TEST(CliTest, HelpShowsExamples) {
  std::string out, err;
  EXPECT_EQ(RunTrainctl({"submit", "--help"}, &out, &err), 0);
  EXPECT_THAT(out, HasSubstr("trainctl submit examples/fashion-mnist-mlp.yaml --follow"));
}

TEST(RecentJobsTest, HidesOnlyFinalJobsThatEndedBeforeTheWindow) {
  v1::ListJobsResponse all;
  auto add = [&all](const std::string& id, v1::JobState state,
                    int64_t created, int64_t finished) {
    v1::Job* job = all.add_jobs();
    job->set_id(id);
    job->set_state(state);
    job->set_created_unix_ms(created);
    job->set_finished_unix_ms(finished);
  };
  const int64_t day = 24 * 3600 * 1000;
  const int64_t now = 10 * day;
  add("old-done", v1::JOB_STATE_SUCCEEDED, 1, now - day - 1);
  add("recent-fail", v1::JOB_STATE_FAILED, 1, now - day + 1);
  add("old-running", v1::JOB_STATE_RUNNING, 1, 0);
  add("old-cancelled-in-queue", v1::JOB_STATE_CANCELLED, 5, 0);
  add("queued", v1::JOB_STATE_QUEUED, now, 0);
  int hidden = -1;
  v1::ListJobsResponse kept = RecentJobs(all, now, absl::Hours(24), &hidden);
  std::vector<std::string> ids;
  for (const v1::Job& job : kept.jobs()) ids.push_back(job.id());
  EXPECT_EQ(ids, (std::vector<std::string>{"recent-fail", "old-running",
                                           "queued"}));
  EXPECT_EQ(hidden, 2);
}

TEST(CliTest, NewCommandsHaveExamplesAndPlotRefusesOtherImageTypes) {
  std::string out, err;
  EXPECT_EQ(RunTrainctl({"logs", "--help"}, &out, &err), 0);
  EXPECT_THAT(out, HasSubstr("trainctl logs job-3 -f --rank 0"));
  EXPECT_EQ(RunTrainctl({"metrics", "--help"}, &out, &err), 0);
  EXPECT_THAT(out, HasSubstr("--from-seq 120"));
  EXPECT_EQ(RunTrainctl({"plot", "--help"}, &out, &err), 0);
  EXPECT_THAT(out, HasSubstr("trainctl plot job-3 -o job-3.svg"));
  EXPECT_THAT(out, HasSubstr("trainctl plot job-3 -o job-3.png"));
  // Refused before any RPC (no server is listening on this address).
  EXPECT_EQ(RunTrainctl({"--coordinator", "127.0.0.1:1", "plot", "job-1", "-o",
                         "x.jpg"},
                        &out, &err),
            2);
  EXPECT_THAT(err, HasSubstr("must end in .svg or .png"));
  EXPECT_EQ(RunTrainctl({"metrics", "job-1", "--format", "xml"}, &out, &err),
            2);
  EXPECT_EQ(RunTrainctl({"logs", "job-1", "--since", "yesterday"}, &out, &err),
            2);
  EXPECT_THAT(err, HasSubstr("--since: 'yesterday'"));
}

TEST(CliTest, EveryCommandsHelpHasExamples) {
  for (const char* command :
       {"submit", "list", "status", "cancel", "watch", "checkpoints", "workers",
        "logs", "metrics", "plot", "version", "completion"}) {
    std::string out, err;
    EXPECT_EQ(RunTrainctl({command, "--help"}, &out, &err), 0) << command;
    EXPECT_THAT(out, HasSubstr("Example")) << command;
    EXPECT_THAT(out, HasSubstr(std::string("trainctl ") + command)) << command;
  }
  std::string out, err;
  EXPECT_EQ(RunTrainctl({"submit", "--help"}, &out, &err), 0);
  EXPECT_THAT(out, HasSubstr("--set training.epochs=1"));
  EXPECT_EQ(RunTrainctl({"watch", "--help"}, &out, &err), 0);
  EXPECT_THAT(out, HasSubstr("--plain"));
}

TEST(CliTest, VersionAsJson) {
  std::string out, err;
  EXPECT_EQ(RunTrainctl({"version", "--client", "--output", "json"}, &out, &err), 0);
  // gtest's own regex has no [^...]; std::regex has.
  EXPECT_TRUE(std::regex_match(
      out, std::regex(R"(\{"trainctl":"[^"]+","grpc":"[^"]+","protobuf":"[^"]+"\}\n)")))
      << out;
}

TEST(CliTest, ServerVersionLineAndJson) {
  v1::ServerInfo info;
  info.set_version("9.9.9");
  info.set_grpc_version("1.51.1");
  info.set_protobuf_version("3.21.12");
  info.set_started_unix_ms(1'000'000);
  info.set_workers(2);
  info.set_caller("alice");
  info.set_caller_role("user");
  std::ostringstream line;
  PrintServerVersion(line, false, "head:7070", info,
                     1'000'000 + (2 * 3600 + 5 * 60) * 1000);
  EXPECT_THAT(line.str(),
              HasSubstr("coordinator head:7070: trainctl 9.9.9 (gRPC 1.51.1, "
                        "Protobuf 3.21.12), up 2h 5m, 2 workers; your token "
                        "is alice's (user); this CLI is "));
  std::ostringstream unreachable;
  PrintServerVersion(unreachable, false, "head:7070",
                     absl::UnavailableError("cannot reach the coordinator"), 0);
  EXPECT_EQ(unreachable.str(),
            "coordinator head:7070: cannot ask it: cannot reach the coordinator\n");
  std::ostringstream json;
  PrintServerVersion(json, true, "head:7070", info, 0);
  EXPECT_THAT(json.str(), HasSubstr("\"coordinator\":{\"address\":\"head:7070\","
                                    "\"trainctl\":\"9.9.9\""));
  EXPECT_THAT(json.str(), HasSubstr("\"callerRole\":\"user\"}}"));
}

}  // namespace
}  // namespace trainctl::client
