#include "client/history_command.h"

#include <tuple>

#include "client/history_render.h"

namespace trainctl::client {

CLI::App* AddHistoryCommand(CLI::App& app, HistoryArgs* args) {
  CLI::App* history = app.add_subcommand(
      "history", "Accounting: each job's owner, wait, elapsed time, "
                 "slot-hours and GPU-hours, restarts and final metrics");
  history->add_option("--user", args->user,
                      "Only this user's jobs (another user's: admins only)");
  history
      ->add_option("--state", args->states,
                   "Only jobs in these states (comma-separated or repeated)")
      ->delimiter(',');
  history->add_option("--since", args->since,
                      "Jobs that had not ended by then, their usage counted "
                      "from then: a date (2026-12-01, '2026-12-01 14:30') or "
                      "an age (90m, 36h, 7d, 2w)");
  history->add_option("--until", args->until,
                      "Jobs submitted before then, their usage counted up to "
                      "then (same forms)");
  history->footer(
      "\nSlot-hours count each RUNNING period with the ranks it held (GPU-hours: "
      "those on GPUs); a running job's up to now, its ELAPSED marked '+'. "
      "RESTARTS shows restarts/preemptions when it was preempted.\n\n"
      "Examples:\n  trainctl history --since 7d\n"
      "  trainctl history --user alice --state succeeded,failed\n"
      "  trainctl history --since 2026-12-01 --until 2026-12-02 -o json");
  return history;
}

int CmdHistory(Env& env, const HistoryArgs& args) {
  v1::GetHistoryRequest request;
  request.set_owner(args.user);
  for (const std::string& name : args.states) {
    absl::StatusOr<v1::JobState> state = ParseStateName(name);
    if (!state.ok()) {
      env.err << "trainctl: --state: " << state.status().message() << "\n";
      return kExitUsage;
    }
    request.add_states(*state);
  }
  for (auto [flag, text, field] :
       {std::tuple{"--since", &args.since, &v1::GetHistoryRequest::set_since_unix_ms},
        std::tuple{"--until", &args.until, &v1::GetHistoryRequest::set_until_unix_ms}}) {
    if (text->empty()) continue;
    absl::StatusOr<int64_t> when =
        ParseWhen(*text, flag, env.ctx.now_unix_ms, env.ctx.tz);
    if (!when.ok()) {
      env.err << "trainctl: " << when.status().message() << "\n";
      return kExitUsage;
    }
    (request.*field)(*when);
  }
  if (request.until_unix_ms() > 0 && request.since_unix_ms() >= request.until_unix_ms()) {
    env.err << "trainctl: --since must be before --until\n";
    return kExitUsage;
  }
  absl::StatusOr<v1::GetHistoryResponse> history =
      env.client->GetHistory(std::move(request));
  if (!history.ok()) return Fail(env, history.status());
  env.out << (env.json ? ToJson(*history, /*pretty=*/true) + "\n"
                       : RenderHistory(*history, env.ctx));
  return kExitOk;
}

}  // namespace trainctl::client
