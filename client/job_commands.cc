#include "client/job_commands.h"

#include "absl/time/time.h"
#include "client/commands.h"
#include "client/format.h"
#include "client/json_text.h"
#include "client/queue_render.h"
#include "client/render.h"

namespace trainctl::client {
namespace {

// How long `list` keeps showing a finished job without --all.
constexpr absl::Duration kListRecent = absl::Hours(24);

}  // namespace

int CmdList(Env& env, const std::vector<std::string>& state_names, bool all,
            bool quiet) {
  std::vector<v1::JobState> states;
  for (const std::string& name : state_names) {
    absl::StatusOr<v1::JobState> state = ParseStateName(name);
    if (!state.ok()) {
      env.err << "trainctl: " << state.status().message() << "\n";
      return kExitUsage;
    }
    states.push_back(*state);
  }
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
