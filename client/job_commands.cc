#include "client/job_commands.h"

#include <algorithm>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/commands.h"
#include "client/format.h"
#include "client/json_text.h"
#include "client/queue_render.h"
#include "client/render.h"
#include "client/watch.h"

namespace trainctl::client {
namespace {

// How long `list` keeps showing a finished job without --all.
constexpr absl::Duration kListRecent = absl::Hours(24);

// How list -w rides out a coordinator restart: as `watch` does (watch.h),
// it connects again with a growing pause and lists again, and gives up
// after a minute without a stream.
constexpr absl::Duration kWatchOutage = absl::Seconds(60);
constexpr absl::Duration kFirstPause = absl::Milliseconds(250);
constexpr absl::Duration kLongestPause = absl::Seconds(5);
constexpr absl::Duration kHealthyStream = absl::Seconds(15);

// list -w: the list as `list` prints it, then a row per state change in
// the same columns, until interrupted; after a coordinator restart the
// list again, then its changes.
int ListAndWatch(Env& env, const std::vector<v1::JobState>& states, bool all,
                 bool quiet) {
  v1::ListJobsResponse listing;  // pages of a list not yet complete
  std::vector<size_t> widths;    // the table's columns, from the first list
  bool streamed = false;  // some stream answered: later breaks are retried
  auto on_response = [&](const v1::WatchJobsResponse& r) {
    streamed = true;
    env.ctx.now_unix_ms = absl::ToUnixMillis(absl::Now());
    if (env.json) {  // the stream's messages, one JSON line each
      env.out << ToJson(r, /*pretty=*/false) << "\n" << std::flush;
      return true;
    }
    std::vector<v1::Job> rows;
    if (r.list_page()) {
      for (const v1::Job& job : r.jobs()) *listing.add_jobs() = job;
      if (!r.list_end()) return true;
      int hidden = 0;
      if (!all) listing = RecentJobs(listing, env.ctx.now_unix_ms, kListRecent, &hidden);
      rows.assign(listing.jobs().begin(), listing.jobs().end());
      listing.clear_jobs();
    } else {
      // The row as of the change: its state and reason, not the job's now.
      for (v1::Job job : r.jobs()) {
        job.set_state(r.change().to());
        job.set_reason(r.change().reason());
        job.clear_pending_reason();
        rows.push_back(std::move(job));
      }
    }
    std::vector<std::vector<std::string>> cells;
    for (const v1::Job& job : rows) cells.push_back(JobTableRow(job, env.ctx));
    if (quiet) {
      for (const v1::Job& job : rows) env.out << job.id() << "\n";
    } else {
      if (widths.empty()) {
        widths = ColumnWidths(JobTableHeader(), cells);
        env.out << RenderRow(JobTableHeader(), widths);
      }
      for (const auto& row : cells) env.out << RenderRow(row, widths);
    }
    env.out << std::flush;
    return true;
  };
  absl::Duration pause = kFirstPause;
  absl::Time down_since = absl::Now();
  for (;;) {
    const absl::Time opened = absl::Now();
    listing.clear_jobs();
    absl::Status ended = env.client->WatchJobs(states, on_response);
    if (ended.ok()) return kExitOk;
    // Nothing to resume (never reached, or refused): say why at once.
    if (!IsRetryableStreamEnd(ended) || !streamed) return Fail(env, ended);
    if (absl::Now() - opened >= kHealthyStream) {  // it was up: a new outage
      down_since = absl::Now();
      pause = kFirstPause;
    }
    if (absl::Now() - down_since >= kWatchOutage) return Fail(env, ended);
    env.err << "trainctl: the coordinator's stream broke (" << ended.message()
            << "); listing again in " << absl::FormatDuration(pause) << "\n";
    absl::SleepFor(pause);
    pause = std::min(pause * 2, kLongestPause);
  }
}

}  // namespace

int CmdList(Env& env, const std::vector<std::string>& state_names, bool all,
            bool quiet, bool watch) {
  std::vector<v1::JobState> states;
  for (const std::string& name : state_names) {
    absl::StatusOr<v1::JobState> state = ParseStateName(name);
    if (!state.ok()) {
      env.err << "trainctl: " << state.status().message() << "\n";
      return kExitUsage;
    }
    states.push_back(*state);
  }
  if (watch) return ListAndWatch(env, states, all, quiet);
  absl::StatusOr<v1::ListJobsResponse> response = env.client->ListJobs(states);
  if (!response.ok()) return Fail(env, response.status());
  int hidden = 0;
  if (!all) {
    *response = RecentJobs(*response, env.ctx.now_unix_ms, kListRecent, &hidden);
  }
  if (quiet) {
    for (const v1::Job& job : response->jobs()) env.out << job.id() << "\n";
  } else if (env.json) {
    env.out << ToJson(*response, /*pretty=*/true) << "\n";
  } else {
    env.out << RenderJobTable(*response, env.ctx);
    // On stderr so the table stays clean for scripts that parse it.
    if (hidden > 0) {
      env.err << "(" << hidden << " jobs finished more than 24h ago are "
              << "hidden; --all shows them)\n";
    }
  }
  return kExitOk;
}

int CmdStatus(Env& env, const std::string& job_id) {
  absl::StatusOr<v1::Job> job = env.client->GetJob(job_id);
  if (!job.ok()) return Fail(env, job.status());
  env.out << (env.json ? ToJson(*job, /*pretty=*/true) + "\n"
                       : RenderJobStatus(*job, env.ctx));
  return kExitOk;
}

int CmdCancel(Env& env, const std::string& job_id, const std::string& reason) {
  absl::StatusOr<v1::Job> job = env.client->CancelJob(job_id, reason);
  if (!job.ok()) return Fail(env, job.status());
  if (env.json) {
    env.out << ToJson(*job, /*pretty=*/true) << "\n";
  } else {
    env.out << "job " << job->id() << ": " << StateName(job->state());
    if (!job->reason().empty()) env.out << " (" << job->reason() << ")";
    env.out << "\n";
  }
  return kExitOk;
}

int CmdPriority(Env& env, const std::string& job_id,
                const std::string& priority) {
  absl::StatusOr<v1::Job> job = env.client->SetJobPriority(job_id, priority);
  if (!job.ok()) return Fail(env, job.status());
  if (env.json) {
    env.out << ToJson(*job, /*pretty=*/true) << "\n";
    return kExitOk;
  }
  env.out << "job " << job->id() << ": priority " << job->spec().priority()
          << ", " << StateName(job->state());
  const std::string& why =
      IsWaiting(job->state()) && !job->pending_reason().empty()
          ? job->pending_reason()
          : job->reason();
  if (!why.empty()) env.out << " (" << why << ")";
  env.out << "\n";
  return kExitOk;
}

int CmdDelete(Env& env, const std::vector<std::string>& job_ids) {
  int exit_code = kExitOk;
  for (const std::string& id : job_ids) {
    if (absl::Status deleted = env.client->DeleteJob(id); !deleted.ok()) {
      exit_code = Fail(env, deleted);  // the others are still tried
      continue;
    }
    if (!env.json) env.out << "job " << id << ": deleted\n";
  }
  if (env.json && exit_code == kExitOk) env.out << "{}\n";
  return exit_code;
}

int CmdCheckpoints(Env& env, const std::string& job_id) {
  absl::StatusOr<v1::ListCheckpointsResponse> response =
      env.client->ListCheckpoints(job_id);
  if (!response.ok()) return Fail(env, response.status());
  env.out << (env.json ? ToJson(*response, /*pretty=*/true) + "\n"
                       : RenderCheckpointTable(*response, env.ctx));
  return kExitOk;
}

int CmdWorkers(Env& env) {
  absl::StatusOr<v1::ListWorkersResponse> response = env.client->ListWorkers();
  if (!response.ok()) return Fail(env, response.status());
  env.out << (env.json ? ToJson(*response, /*pretty=*/true) + "\n"
                       : RenderWorkerTable(*response, env.ctx));
  return kExitOk;
}

int CmdQueue(Env& env) {
  absl::StatusOr<v1::GetQueueResponse> response = env.client->GetQueue();
  if (!response.ok()) return Fail(env, response.status());
  env.out << (env.json ? ToJson(*response, /*pretty=*/true) + "\n"
                       : RenderQueue(*response, env.ctx));
  return kExitOk;
}

}  // namespace trainctl::client
