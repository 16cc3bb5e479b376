#include <algorithm>
#include <cstdint>
#include <set>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "common/checkpoint_name.h"
#include "common/grpc_status.h"
#include "common/spec.h"
#include "common/utf8_sanitize.h"
#include "common/vocabulary.h"
#include "coordinator/caller_view.h"
#include "coordinator/job_state.h"
#include "coordinator/services.h"

namespace trainctl::coordinator {
namespace {

// How long one wait for new events lasts before the handler re-checks
// whether the client left or the server is stopping.
constexpr int64_t kWatchPollMs = 500;
// Events copied out of the hub per wait: a watcher replaying a long job
// holds the hub's lock for one batch at a time.
constexpr size_t kWatchBatch = 1000;
constexpr int kMaxWatchersPerClient = 64;
constexpr size_t kMaxCancelReasonBytes = 1024;

// "ipv4:10.0.0.7:51234" -> "ipv4:10.0.0.7": one client, whatever its port.
std::string PeerHost(const std::string& peer) {
  return peer.substr(0, peer.rfind(':'));
}

}  // namespace

absl::Status JobsService::BeginWatch(const std::string& client, const char* what) {
  std::lock_guard<std::mutex> lock(watchers_mu_);
  if (watchers_[client] >= kMaxWatchersPerClient) {
    return absl::ResourceExhaustedError(
        absl::StrCat(client, " already has ", kMaxWatchersPerClient,
                     " watches open (the limit per client); end some ", what,
                     " first"));
  }
  ++watchers_[client];
  return absl::OkStatus();
}

void JobsService::EndWatch(const std::string& client) {
  std::lock_guard<std::mutex> lock(watchers_mu_);
  if (--watchers_[client] == 0) watchers_.erase(client);
}

absl::StatusOr<v1::Job> JobsService::JobFor(const grpc::ServerContext& ctx,
                                            const std::string& job_id,
                                            const char* action) const {
  absl::StatusOr<auth::Caller> caller = auth_.Person(ctx);
  if (!caller.ok()) return caller.status();
  return CallerView(jobs_, *caller).Job(job_id, action);
}

absl::Status CheckModelAllowed(TorchScriptPolicy policy,
                               const auth::Caller& caller,
                               const std::string& spec_text) {
  if (policy == TorchScriptPolicy::kAllow) return absl::OkStatus();
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(spec_text);
  if (!spec.ok() || ModelTypeOf(spec->model()) != ModelType::kTorchScript) {
    return absl::OkStatus();
  }
  if (policy == TorchScriptPolicy::kAdmins && caller.IsAdmin()) {
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "model.type: torchscript models are programs that run as the worker's "
      "user; this coordinator accepts them ",
      policy == TorchScriptPolicy::kAdmins ? "from admins only"
                                                 : "from nobody",
      " (--torchscript); use a built-in model type"));
}

grpc::Status JobsService::SubmitJob(grpc::ServerContext* ctx,
                                    const v1::SubmitJobRequest* req,
                                    v1::SubmitJobResponse* resp) {
  absl::StatusOr<auth::Caller> caller = auth_.Person(*ctx);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  if (absl::Status allowed = CheckModelAllowed(torchscript_, *caller, req->spec_text());
      !allowed.ok()) {
    return ToGrpcStatus(allowed);
  }
  if (absl::Status files = CheckShippedFiles(files_, *caller, req->spec_text());
      !files.ok()) {
    return ToGrpcStatus(files);
  }
  if (!req->resume_from().empty()) {
    // Resuming reads another job's checkpoint: only where it may be read.
    absl::StatusOr<CheckpointRef> from = ParseCheckpointRef(req->resume_from(), "resume_from");
    if (!from.ok()) return ToGrpcStatus(from.status());
    absl::StatusOr<v1::Job> source = JobFor(*ctx, from->job_id, "resume from");
    if (!source.ok() && !absl::IsNotFound(source.status())) {
      return ToGrpcStatus(source.status());
    }
  }
  if (req->dry_run()) {
    absl::StatusOr<v1::SubmitJobResponse> dry =
        jobs_.DryRunOnWorker(req->spec_text(), req->resume_from(),
                             caller->name);
    if (!dry.ok()) return ToGrpcStatus(dry.status());
    *resp = *std::move(dry);
    return grpc::Status::OK;
  }
  absl::StatusOr<v1::Job> job = jobs_.Submit(
      req->spec_text(), false, req->resume_from(), caller->name);
  if (!job.ok()) return ToGrpcStatus(job.status());
  *resp->mutable_job() = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobsService::GetJob(grpc::ServerContext* ctx,
                                 const v1::GetJobRequest* req, v1::Job* resp) {
  absl::StatusOr<v1::Job> job = JobFor(*ctx, req->job_id(), "read");
  if (!job.ok()) return ToGrpcStatus(job.status());
  *resp = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobsService::ListJobs(grpc::ServerContext* ctx,
                                   const v1::ListJobsRequest* req,
                                   v1::ListJobsResponse* resp) {
  absl::StatusOr<auth::Caller> caller = auth_.Person(*ctx);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  std::vector<v1::JobState> states;
  for (int s : req->states()) states.push_back(static_cast<v1::JobState>(s));
  // Bounded well under the CLI's 64 MiB receive limit, whatever the specs.
  constexpr size_t kMaxPageBytes = 16 << 20;
  const size_t max_jobs = req->page_size() > 0
                              ? static_cast<size_t>(req->page_size())
                              : SIZE_MAX;
  absl::StatusOr<JobManager::Page> page = CallerView(jobs_, *caller).JobsPage(
      states, req->page_token(), max_jobs, kMaxPageBytes);
  if (!page.ok()) return ToGrpcStatus(page.status());
  for (v1::Job& job : page->jobs) *resp->add_jobs() = std::move(job);
  if (page->more && resp->jobs_size() > 0) {
    resp->set_next_page_token(resp->jobs(resp->jobs_size() - 1).id());
  }
  return grpc::Status::OK;
}

grpc::Status JobsService::CancelJob(grpc::ServerContext* ctx,
                                    const v1::CancelJobRequest* req,
                                    v1::Job* resp) {
  absl::StatusOr<v1::Job> owned = JobFor(*ctx, req->job_id(), "cancel");
  if (!owned.ok()) return ToGrpcStatus(owned.status());
  // Kept in the job, its history and its event, and sent to its agents.
  if (req->reason().size() > kMaxCancelReasonBytes) {
    return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
        "reason: ", req->reason().size(), " bytes; at most ",
        kMaxCancelReasonBytes, " are allowed")));
  }
  if (HasControlCharacters(req->reason())) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        "reason: must not contain control characters (it is shown in "
        "terminals and logs)"));
  }
  absl::StatusOr<v1::Job> job = jobs_.Cancel(req->job_id(), req->reason());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *resp = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobsService::DeleteJob(grpc::ServerContext* ctx,
                                    const v1::DeleteJobRequest* req,
                                    v1::DeleteJobResponse*) {
  absl::StatusOr<v1::Job> owned = JobFor(*ctx, req->job_id(), "delete");
  if (!owned.ok()) return ToGrpcStatus(owned.status());
  return ToGrpcStatus(jobs_.Delete(req->job_id()));
}

grpc::Status JobsService::WatchJob(grpc::ServerContext* ctx,
                                   const v1::WatchJobRequest* req,
                                   grpc::ServerWriter<v1::JobEvent>* writer) {
  absl::StatusOr<auth::Caller> caller = auth_.Person(*ctx);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<v1::Job> job = JobFor(*ctx, req->job_id(), "watch");
  if (!job.ok()) return ToGrpcStatus(job.status());
  const std::string client =
      auth_.insecure() ? PeerHost(ctx->peer()) : caller->name;
  if (absl::Status begun = BeginWatch(client, "`trainctl watch` / `logs -f`");
      !begun.ok()) {
    return ToGrpcStatus(begun);
  }
  absl::Cleanup release = [this, &client] { EndWatch(client); };
  int64_t next = std::max<int64_t>(1, req->from_seq());
  if (req->has_follow() && !req->follow()) {
    // What is published now, in bounded batches, then the end.
    const int64_t last = events_.PublishedSeq(req->job_id());
    while (next <= last && !ctx->IsCancelled()) {
      bool closed = false;
      absl::StatusOr<std::vector<v1::JobEvent>> batch = events_.WaitForEvents(
          req->job_id(), next, 0, &closed,
          static_cast<size_t>(std::min<int64_t>(kWatchBatch, last - next + 1)));
      if (!batch.ok()) return ToGrpcStatus(batch.status());
      if (batch->empty()) break;  // forgotten meanwhile
      for (const v1::JobEvent& event : *batch) {
        if (!writer->Write(event)) return grpc::Status::OK;  // client left
        next = event.seq() + 1;
      }
    }
    return grpc::Status::OK;
  }
  while (!ctx->IsCancelled() && !stopping_.load()) {
    // A token revoked (or a user removed) while the stream is open ends it
    // within one poll, as the next call would be refused.
    if (absl::StatusOr<auth::Caller> still = auth_.Person(*ctx); !still.ok()) {
      return ToGrpcStatus(still.status());
    }
    bool closed = false;
    absl::StatusOr<std::vector<v1::JobEvent>> batch =
        events_.WaitForEvents(req->job_id(), next, kWatchPollMs, &closed,
                              kWatchBatch);
    if (!batch.ok()) return ToGrpcStatus(batch.status());
    for (const v1::JobEvent& event : *batch) {
      if (!writer->Write(event)) return grpc::Status::OK;  // client left
      next = event.seq() + 1;
    }
    if (closed) return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "coordinator is shutting down; watch again to resume");
}

grpc::Status JobsService::WatchJobs(grpc::ServerContext* ctx,
                                    const v1::WatchJobsRequest* req,
                                    grpc::ServerWriter<v1::WatchJobsResponse>* writer) {
  absl::StatusOr<auth::Caller> caller = auth_.Person(*ctx);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  const std::string client =
      auth_.insecure() ? PeerHost(ctx->peer()) : caller->name;
  if (absl::Status begun = BeginWatch(client, "`trainctl list -w`"); !begun.ok()) {
    return ToGrpcStatus(begun);
  }
  absl::Cleanup release = [this, &client] { EndWatch(client); };
  std::set<v1::JobState> wanted;
  std::vector<v1::JobState> states;
  for (int s : req->states()) {
    wanted.insert(static_cast<v1::JobState>(s));
    states.push_back(static_cast<v1::JobState>(s));
  }
  auto in_states = [&](v1::JobState state) {
    return wanted.empty() || wanted.count(state) > 0;
  };
  // The whole list, page by page; false when the client left.
  auto send_list = [&]() -> absl::StatusOr<bool> {
    constexpr size_t kMaxPageBytes = 16 << 20;
    std::string token;
    for (;;) {
      absl::StatusOr<JobManager::Page> page =
          CallerView(jobs_, *caller).JobsPage(states, token, SIZE_MAX, kMaxPageBytes);
      if (!page.ok()) return page.status();
      v1::WatchJobsResponse response;
      for (v1::Job& job : page->jobs) *response.add_jobs() = std::move(job);
      response.set_list_page(true);
      response.set_list_end(!page->more || response.jobs().empty());
      if (!response.list_end()) token = response.jobs(response.jobs_size() - 1).id();
      if (!writer->Write(response)) return false;
      if (response.list_end()) return true;
    }
  };
  // Read the feed from before the list, so no change falls between them.
  int64_t cursor = events_.StateChangeSeq();
  absl::StatusOr<bool> listed = send_list();
  if (!listed.ok()) return ToGrpcStatus(listed.status());
  if (!*listed) return grpc::Status::OK;
  while (!ctx->IsCancelled() && !stopping_.load()) {
    if (absl::StatusOr<auth::Caller> still = auth_.Person(*ctx); !still.ok()) {
      return ToGrpcStatus(still.status());
    }
    bool missed = false;
    std::vector<EventHub::StateChange> changes =
        events_.WaitForStateChanges(cursor, kWatchPollMs, &missed);
    if (!changes.empty()) cursor = changes.back().feed_seq;
    if (missed) {
      listed = send_list();
      if (!listed.ok()) return ToGrpcStatus(listed.status());
      if (!*listed) return grpc::Status::OK;
      continue;
    }
    for (const EventHub::StateChange& change : changes) {
      if (!in_states(change.transition.from()) && !in_states(change.transition.to())) {
        continue;
      }
      absl::StatusOr<v1::Job> job = CallerView(jobs_, *caller).Job(change.job_id, "watch");
      if (!job.ok()) continue;  // another user's job, or deleted meanwhile
      v1::WatchJobsResponse response;
      *response.add_jobs() = *std::move(job);
      *response.mutable_change() = change.transition;
      if (!writer->Write(response)) return grpc::Status::OK;  // client left
    }
  }
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "coordinator is shutting down; list -w again");
}

grpc::Status JobsService::GetServerInfo(grpc::ServerContext* ctx,
                                        const v1::GetServerInfoRequest*,
                                        v1::ServerInfo* resp) {
  absl::StatusOr<auth::Caller> caller = auth_.Person(*ctx);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  resp->set_version(build_.version);
  resp->set_grpc_version(build_.grpc_version);
  resp->set_protobuf_version(build_.protobuf_version);
  resp->set_started_unix_ms(build_.started_unix_ms);
  resp->set_workers(static_cast<int32_t>(jobs_.Workers().size()));
  resp->set_caller(caller->name);
  resp->set_caller_role(caller->IsAdmin() ? "admin" : "user");
  return grpc::Status::OK;
}

grpc::Status JobsService::ListWorkers(grpc::ServerContext* ctx,
                                      const v1::ListWorkersRequest*,
                                      v1::ListWorkersResponse* resp) {
  absl::StatusOr<auth::Caller> caller = auth_.Person(*ctx);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  for (v1::WorkerInfo& w : CallerView(jobs_, *caller).Workers()) {
    *resp->add_workers() = std::move(w);
  }
  return grpc::Status::OK;
}

// Everyone sees the whole queue (where their jobs stand needs the jobs
// ahead) and every user's standing; the names of other users' jobs only
// admins.
grpc::Status JobsService::GetQueue(grpc::ServerContext* ctx,
                                   const v1::GetQueueRequest*,
                                   v1::GetQueueResponse* resp) {
  absl::StatusOr<auth::Caller> caller = auth_.Person(*ctx);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  *resp = jobs_.Queue(caller->IsAdmin() ? nullptr : &caller->name);
  return grpc::Status::OK;
}

grpc::Status JobsService::SetJobPriority(grpc::ServerContext* ctx,
                                         const v1::SetJobPriorityRequest* req,
                                         v1::Job* resp) {
  absl::StatusOr<v1::Job> owned =
      JobFor(*ctx, req->job_id(), "change the priority of");
  if (!owned.ok()) return ToGrpcStatus(owned.status());
  absl::StatusOr<auth::Caller> caller = auth_.Person(*ctx);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<v1::Job> job = jobs_.SetPriority(
      req->job_id(), req->priority(),
      caller->IsAdmin() ? JobManager::PriorityLimit::kAnyClass
                        : JobManager::PriorityLimit::kOwnersMaximum,
      caller->name);
  if (!job.ok()) return ToGrpcStatus(job.status());
  *resp = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobsService::GetHistory(grpc::ServerContext* ctx,
                                     const v1::GetHistoryRequest* req,
                                     v1::GetHistoryResponse* resp) {
  absl::StatusOr<auth::Caller> caller = auth_.Person(*ctx);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  absl::StatusOr<v1::GetHistoryResponse> history =
      CallerView(jobs_, *caller).History(*req, jobs_.NowUnixMs());
  if (!history.ok()) return ToGrpcStatus(history.status());
  *resp = *std::move(history);
  return grpc::Status::OK;
}

grpc::Status JobsService::ListCheckpoints(grpc::ServerContext* ctx,
                                          const v1::ListCheckpointsRequest* req,
                                          v1::ListCheckpointsResponse* resp) {
  absl::StatusOr<v1::Job> owned = JobFor(*ctx, req->job_id(), "read");
  if (!owned.ok()) return ToGrpcStatus(owned.status());
  absl::StatusOr<std::vector<v1::Checkpoint>> catalog =
      jobs_.Checkpoints(req->job_id());
  if (!catalog.ok()) return ToGrpcStatus(catalog.status());
  for (auto& c : *catalog) *resp->add_checkpoints() = std::move(c);
  return grpc::Status::OK;
}

}  // namespace trainctl::coordinator
