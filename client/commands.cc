#include "client/commands.h"

#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <set>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/command_env.h"
#include "client/config.h"
#include "client/coordinator_client.h"
#include "client/format.h"
#include "client/export_command.h"
#include "client/tokenizer_command.h"
#include "client/history_command.h"
#include "client/live_terminal.h"
#include "client/login_command.h"
#include "client/render.h"
#include "client/ship_files.h"
#include "client/spec_edit.h"
#include "client/stream_commands.h"
#include "client/completion_command.h"
#include "client/job_commands.h"
#include "client/version_command.h"
#include "client/watch.h"
#include "client/watch_live.h"
#include "common/closest_name.h"
#include "common/spec.h"
#include "common/spec_reader.h"

namespace trainctl::client {
namespace {

absl::StatusOr<std::string> ReadSpecFile(const std::string& path) {
  if (path == "-") {
    return std::string(std::istreambuf_iterator<char>(std::cin), {});
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read job spec ", path, ": is a directory"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot read job spec ", path, ": ", std::strerror(errno)));
  }
  std::string text(std::istreambuf_iterator<char>(in), {});
  if (in.bad()) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read job spec ", path, ": read error"));
  }
  return text;
}

// Prints the job's events until it is final; exit code by final state. On
// a terminal (unless plain) a live view redrawn in place instead.
int WatchUntilDone(Env& env, const std::string& job_id, int64_t total_steps,
                   bool plain) {
  if (env.terminal && !env.json && !plain) {
    return WatchLive(env, job_id, TerminalWidth(STDOUT_FILENO));
  }
  FollowOptions options;
  options.notice = [&env](const std::string& message) {
    env.err << "trainctl: " << message << std::endl;
  };
  auto open_stream = [&env, &job_id](int64_t from_seq,
                                     const EventCallback& on_event) {
    return env.client->WatchJob(job_id, from_seq, on_event);
  };
  auto on_event = [&](const v1::JobEvent& event) {
    if (env.json) {
      env.out << ToJson(event, /*pretty=*/false) << std::endl;
      return;
    }
    // total_steps may only be known once the job is placed.
    if (total_steps == 0 && event.has_transition() &&
        event.transition().to() == v1::JOB_STATE_RUNNING) {
      absl::StatusOr<v1::Job> job = env.client->GetJob(job_id);
      if (job.ok()) total_steps = job->total_steps();
    }
    env.ctx.now_unix_ms = absl::ToUnixMillis(absl::Now());
    env.out << RenderEventLine(event, total_steps, env.ctx) << std::endl;
  };
  absl::StatusOr<v1::JobState> final_state =
      FollowJob(job_id, open_stream, on_event, options);
  if (!final_state.ok()) return Fail(env, final_state.status());
  return ExitCodeForState(*final_state);
}

struct SubmitArgs {
  std::string path;
  bool follow = false;
  bool dry_run = false;
  bool plain = false;
  std::string resume_from;
  SpecEdits edits;
};

int CmdSubmit(Env& env, const SubmitArgs& args) {
  absl::StatusOr<std::string> text = ReadSpecFile(args.path);
  if (text.ok()) text = ApplySpecEdits(*text, args.edits);
  if (!text.ok()) {
    env.err << "trainctl: " << text.status().message() << "\n";
    return kExitUsage;
  }
  // Relative paths are files beside the spec (stdin: in this directory).
  const std::string base_dir =
      args.path == "-" ? "" : std::filesystem::path(args.path).parent_path().string();
  text = ShipLocalFiles(
      *text, base_dir,
      [&env](const std::string& path, const std::string& sha256, int64_t size) {
        return env.client->PutFile(path, sha256, size);
      },
      env.err);
  if (!text.ok()) {
    if (text.status().code() != absl::StatusCode::kInvalidArgument) {
      return Fail(env, text.status());
    }
    env.err << "trainctl: " << args.path << ": " << text.status().message() << "\n";
    return kExitUsage;
  }
  absl::StatusOr<v1::SubmitJobResponse> response =
      env.client->SubmitJob(*text, args.dry_run, args.resume_from);
  if (!response.ok()) {
    if (response.status().code() == absl::StatusCode::kInvalidArgument) {
      env.err << RenderSpecErrors(args.path,
                                  std::string(response.status().message()));
      for (const std::string& set : args.edits.sets) {
        env.err << "  (with --set " << set << ")\n";
      }
      return kExitUsage;
    }
    return Fail(env, response.status());
  }
  const v1::Job& job = response->job();
  if (env.json) {
    env.out << ToJson(*response, /*pretty=*/!args.follow) << std::endl;
  } else if (args.dry_run) {
    env.out << JobSpecToJson(job.spec()) << "\n" << RenderDryRunPlan(*response);
    env.err << "job spec " << args.path
            << " is valid (dry run: nothing submitted)\n";
  } else {
    env.out << job.id() << std::endl;
    if (!args.follow && job.state() == v1::JOB_STATE_QUEUED &&
        !job.pending_reason().empty()) {
      env.err << "waiting: " << job.pending_reason() << "\n";
    }
  }
  if (args.dry_run || !args.follow) return kExitOk;
  return WatchUntilDone(env, job.id(), job.total_steps(), args.plain);
}

int CmdWatch(Env& env, const std::string& job_id, bool plain) {
  // A unary call first, so an unknown job or a dead coordinator is reported
  // at once (exit 4 / 3) instead of entering the reconnect loop.
  absl::StatusOr<v1::Job> job = env.client->GetJob(job_id);
  if (!job.ok()) return Fail(env, job.status());
  return WatchUntilDone(env, job_id, job->total_steps(), plain);
}

constexpr char kMainFooter[] = R"(
Defaults: a flag wins over $TRAINCTL_COORDINATOR / $TRAINCTL_OUTPUT, which
win over ~/.config/trainctl/config.yaml (keys coordinator, output; the
directory follows $XDG_CONFIG_HOME), then 127.0.0.1:7070 and table.
Connections use TLS verified with --ca-cert and send --token (both also from
$TRAINCTL_CA_CERT / $TRAINCTL_TOKEN or the config file; `trainctl login` saves
them); on the coordinator's own machine its CA and admin token are found in
its default state directory. --insecure talks plaintext to a coordinator run
--insecure.
Exit codes: 0 ok; 1 job FAILED/CANCELLED or server-side error; 2 bad usage or
invalid spec; 3 coordinator unreachable; 4 job not found; 5 not logged in or
not allowed (another user's job).
Run 'trainctl SUBCOMMAND --help' for examples.)";

// The first word of argv that is neither an option nor a global option's
// value: the command the user meant ("" when there is none).
std::string FirstCommandWord(int argc, const char* const* argv) {
  static const std::set<std::string> kTakesValue = {"--coordinator", "-o", "--output",
                                                    "--token", "--ca-cert"};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return "";
    if (arg.empty() || arg[0] != '-') return arg;
    if (kTakesValue.count(arg)) ++i;
  }
  return "";
}

}  // namespace

int RunCli(int argc, const char* const* argv, std::ostream& out,
           std::ostream& err) {
  CLI::App app{"trainctl: submit, inspect and follow training jobs",
               "trainctl"};
  app.footer(kMainFooter);
  app.require_subcommand(1);
#ifdef TRAINCTL_VERSION
  app.set_version_flag("--version", TRAINCTL_VERSION);
#endif
  // Lets the global options follow the subcommand too.
  app.fallthrough();
  std::string coordinator;
  std::string output;  // empty: not given, see ResolveSettings
  app.add_option("--coordinator", coordinator, "Coordinator address HOST:PORT");
  app.add_option("-o,--output", output, "Output format: table or json")
      ->check(CLI::IsMember({"table", "json"}));
  SecurityFlags security_flags;
  app.add_option("--token", security_flags.token,
                 "Bearer token (default: $TRAINCTL_TOKEN, the config file's "
                 "token: as saved by `trainctl login`)");
  app.add_option("--ca-cert", security_flags.ca_cert,
                 "The cluster CA certificate to verify the coordinator with "
                 "(its tls/ca.crt)");
  app.add_flag("--insecure", security_flags.insecure,
               "Plaintext without a token, for a coordinator run --insecure");
  bool wide = false;
  app.add_flag("--wide", wide,
               "Every metric key in event lines, status and checkpoints (by "
               "default the ones a person reads; -o json always has all)");

  SubmitArgs submit_args;
  CLI::App* submit =
      app.add_subcommand("submit", "Submit a job spec (YAML or JSON)");
  submit->add_option("FILE", submit_args.path, "Job spec file, '-' for stdin")
      ->required();
  CLI::Option* follow_opt = submit->add_flag(
      "-f,--follow", submit_args.follow, "Watch the job until it ends");
  submit
      ->add_flag("--dry-run", submit_args.dry_run,
                 "Validate, print the resolved spec and what the coordinator "
                 "would do (placement or why it would wait, shard plan); "
                 "queue nothing")
      ->excludes(follow_opt);
  submit->add_option("--set", submit_args.edits.sets,
                     "Edit the spec before sending: KEY.PATH=VALUE, the "
                     "value as YAML (repeatable)")
      ->allow_extra_args(false);  // each --set one value; FILE stays FILE
  submit->add_option("--name", submit_args.edits.name, "Job name (replaces name:)");
  submit->add_flag("--plain", submit_args.plain,
                   "With --follow: plain lines even on a terminal");
  submit->add_option("--resume-from", submit_args.resume_from,
                     "Start from a checkpoint: JOB (its latest) or JOB:STEP");
  submit->footer(
      "\nExamples:\n  trainctl submit examples/fashion-mnist-mlp.yaml\n"
      "  trainctl submit examples/fashion-mnist-mlp.yaml --follow\n"
      "  trainctl submit examples/fashion-mnist-mlp.yaml --set training.epochs=1 "
      "--set optimizer.lr=0.01 --name quick\n"
      "  trainctl submit --dry-run examples/fashion-mnist-mlp.yaml\n"
      "  trainctl submit examples/fashion-mnist-mlp.yaml --resume-from job-7:1800");

  std::vector<std::string> states;
  CLI::App* list = app.add_subcommand("list", "List jobs");
  list->add_option("--state", states,
                   "Only jobs in these states (queued, running, restarting, preempted, "
                   "succeeded, failed, cancelled; comma-separated or "
                   "repeated)")
      ->delimiter(',');
  bool list_all = false;
  list->add_flag("--all", list_all,
                 "Also jobs that finished more than 24 hours ago");
  bool list_quiet = false;
  list->add_flag("-q,--quiet", list_quiet, "Only the job ids, one a line");
  bool list_watch = false;
  list->add_flag("-w,--watch", list_watch,
                 "Then a row each time a job in --state enters or leaves it, "
                 "until interrupted (the coordinator streams the changes)");
  list->footer(
      "\nWithout --all, jobs that finished more than 24 hours ago are "
      "hidden.\n\nExamples:\n  trainctl list --state queued,running\n"
      "  trainctl list --all --output json\n"
      "  trainctl list -q --state running | xargs -n1 trainctl cancel\n"
      "  trainctl list -w --state queued,running");

  std::string job_id;
  CLI::App* status = app.add_subcommand("status", "Show one job in detail");
  status->add_option("JOB", job_id, "Job id")->required();
  status->footer("\nExample:\n  trainctl status JOB_ID");

  std::string cancel_reason = "cancelled by user (trainctl cancel)";
  CLI::App* cancel = app.add_subcommand("cancel", "Cancel a job");
  cancel->add_option("JOB", job_id, "Job id")->required();
  cancel->add_option("--reason", cancel_reason, "Reason recorded with the job");
  cancel->footer("\nExample:\n  trainctl cancel JOB_ID --reason 'wrong lr'");

  std::vector<std::string> delete_ids;
  CLI::App* remove = app.add_subcommand(
      "delete", "Forget finished jobs: their record, events and checkpoint "
                "catalog (checkpoint files stay on disk)");
  remove->add_option("JOB", delete_ids, "Job ids")->required();
  remove->footer("\nExample:\n  trainctl delete job-3 job-4");

  bool watch_plain = false;
  CLI::App* watch = app.add_subcommand(
      "watch", "Follow a job until it ends: a live view on a terminal, "
               "otherwise one line per transition, metric and log line");
  watch->add_option("JOB", job_id, "Job id")->required();
  watch->add_flag("--plain", watch_plain,
                  "Plain lines even on a terminal (no redrawing)");
  watch->footer(
      "\nOn a terminal the view is redrawn in place: progress bar with step, "
      "epoch and ETA, loss sparkline, samples/s, step time with the slowest "
      "rank, per-rank phase, start-up progress; state changes scroll above "
      "it.\n\nExamples:\n  trainctl watch JOB_ID\n"
      "  trainctl watch JOB_ID --plain | tee watch.log\n"
      "  trainctl watch JOB_ID --output json | jq .metric");

  CLI::App* checkpoints =
      app.add_subcommand("checkpoints", "List a job's checkpoints");
  checkpoints->add_option("JOB", job_id, "Job id")->required();
  checkpoints->footer(
      "\nExamples:\n  trainctl checkpoints JOB_ID\n"
      "  trainctl submit job.yaml --resume-from JOB_ID:STEP");

  CLI::App* workers = app.add_subcommand("workers", "List registered workers");
  workers->footer("\nExample:\n  trainctl workers");

  CLI::App* queue = app.add_subcommand(
      "queue", "Pending jobs in the order they will start: priority, "
               "fair-share usage, estimated start, what each waits for");
  queue->footer("\nExamples:\n  trainctl queue\n  trainctl queue -o json\n"
                "The classes and quotas are the coordinator's --scheduling "
                "file (docs/scheduling.md).");

  std::string priority_class;
  CLI::App* priority = app.add_subcommand(
      "priority", "Move a job that has not ended to another priority class");
  priority->add_option("JOB", job_id, "Job id")->required();
  priority->add_option("CLASS", priority_class,
                       "A class of the coordinator's policy (trainctl queue "
                       "lists them); up to your max_class, any for an admin")
      ->required();
  priority->footer("\nExample:\n  trainctl priority JOB_ID urgent");

  StreamArgs stream_args;
  StreamCommands stream = AddStreamCommands(app, stream_args);
  HistoryArgs history_args;
  CLI::App* history = AddHistoryCommand(app, &history_args);
  ExportArgs export_args;
  CLI::App* export_model = AddExportCommand(app, &export_args);

  bool version_client_only = false;
  CLI::App* version = AddVersionCommand(app, &version_client_only);
  CLI::App* login = AddLoginCommand(app);
  std::string completion_shell;
  CLI::App* completion = AddCompletionCommand(app, &completion_shell);
  TokenizerArgs tokenizer_args;
  CLI::App* tokenizer = AddTokenizerCommand(app, &tokenizer_args);

  // CLI11 answers a misspelt command with "A subcommand is required".
  if (const std::string word = FirstCommandWord(argc, argv); !word.empty()) {
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) {
      names.push_back(sub->get_name());
    }
    if (std::find(names.begin(), names.end(), word) == names.end()) {
      const std::string near = ClosestName(word, names);
      err << "trainctl: unknown command '" << Abbreviated(word) << "'"
          << (near.empty() ? "" : "; did you mean '" + near + "'?")
          << " (trainctl --help lists the commands)\n";
      return kExitUsage;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version arrive here as "errors" with exit code 0.
    return app.exit(e, out, err) == 0 ? kExitOk : kExitUsage;
  }

  if (completion->parsed()) return PrintCompletion(app, completion_shell, out);
  // Local work: no coordinator, so no settings are needed.
  const char* env_output = std::getenv("TRAINCTL_OUTPUT");
  const bool local_json = output == "json" || (output.empty() && env_output != nullptr &&
                                               std::string(env_output) == "json");
  if (tokenizer->parsed()) {
    tokenizer_args.json = local_json;
    return CmdTokenizer(tokenizer_args, std::cin, out, err);
  }
  bool version_json = false;
  if (version->parsed()) {
    version_json = local_json;
    // Before the config file is read: a broken one must not hide this.
    if (version_client_only || !version_json) PrintVersion(out, version_json);
    if (version_client_only) return kExitOk;
  }
  // `version` says why it could not ask the coordinator, and still exits 0.
  auto version_unasked = [&](const std::string& address, const absl::Status& why) {
    PrintServerVersion(out, version_json, address.empty() ? "(none)" : address, why,
                       absl::ToUnixMillis(absl::Now()));
    return kExitOk;
  };

  const std::string config_path = ConfigFilePath(
      std::getenv("XDG_CONFIG_HOME"), std::getenv("HOME"));
  absl::StatusOr<ConfigFile> config = LoadConfigFile(config_path);
  if (!config.ok()) {
    if (version->parsed()) return version_unasked(coordinator, config.status());
    err << "trainctl: " << config.status().message() << "\n";
    return kExitUsage;
  }
  std::map<std::string, std::string> env_vars;
  for (const char* name :
       {"TRAINCTL_COORDINATOR", "TRAINCTL_OUTPUT", "TRAINCTL_TOKEN",
        "TRAINCTL_CA_CERT", "TRAINCTL_INSECURE"}) {
    if (const char* value = std::getenv(name)) env_vars[name] = value;
  }
  absl::StatusOr<Settings> settings = ResolveSettings(
      coordinator, output, env_vars, *config, security_flags);
  if (!settings.ok()) {
    if (version->parsed()) return version_unasked(coordinator, settings.status());
    err << "trainctl: " << settings.status().message() << "\n";
    return kExitUsage;
  }
  if (login->parsed()) {
    return CmdLogin(*settings, config_path, std::cin, out, err);
  }
  absl::StatusOr<ClientSecurity> security =
      ResolveSecurity(*settings, DefaultLocalCoordinatorFiles());
  if (!security.ok()) {
    if (version->parsed()) {
      return version_unasked(settings->coordinator, security.status());
    }
    err << "trainctl: " << security.status().message() << "\n";
    return kExitUsage;
  }
  CoordinatorClient client(settings->coordinator, *security);
  if (version->parsed()) {
    absl::StatusOr<v1::ServerInfo> info = client.GetServerInfo();
    if (!info.ok()) {  // the CLI's usual words for it (unreachable, TLS, token)
      info = absl::Status(info.status().code(),
                          DescribeError(info.status(), settings->coordinator));
    }
    PrintServerVersion(out, version_json, settings->coordinator, info,
                       absl::ToUnixMillis(absl::Now()));
    return kExitOk;
  }
  RenderContext ctx;
  ctx.now_unix_ms = absl::ToUnixMillis(absl::Now());
  ctx.tz = absl::LocalTimeZone();
  ctx.wide = wide;
  Env env{&client, out, err, settings->output == "json", ctx};
  env.terminal = &out == &std::cout && IsLiveTerminal(STDOUT_FILENO);

  if (submit->parsed()) {
    return CmdSubmit(env, submit_args);
  }
  if (checkpoints->parsed()) return CmdCheckpoints(env, job_id);
  if (list->parsed()) return CmdList(env, states, list_all, list_quiet, list_watch);
  if (stream.logs->parsed()) return CmdLogs(env, stream_args);
  if (stream.metrics->parsed()) return CmdMetrics(env, stream_args);
  if (stream.plot->parsed()) return CmdPlot(env, stream_args);
  if (status->parsed()) return CmdStatus(env, job_id);
  if (cancel->parsed()) return CmdCancel(env, job_id, cancel_reason);
  if (remove->parsed()) return CmdDelete(env, delete_ids);
  if (watch->parsed()) return CmdWatch(env, job_id, watch_plain);
  if (workers->parsed()) return CmdWorkers(env);
  if (queue->parsed()) return CmdQueue(env);
  if (history->parsed()) return CmdHistory(env, history_args);
  if (export_model->parsed()) return CmdExport(env, export_args);
  if (priority->parsed()) return CmdPriority(env, job_id, priority_class);
  return kExitUsage;  // unreachable: require_subcommand(1)
}

}  // namespace trainctl::client
