#include "common/grpc_status.h"
#include "coordinator/job_state.h"
#include "coordinator/services.h"

namespace trainctl::coordinator {
namespace {

// How long one wait for new events lasts before the handler re-checks
// whether the client left or the server is stopping.
constexpr int64_t kWatchPollMs = 500;

}  // namespace

grpc::Status JobsService::SubmitJob(grpc::ServerContext*,
                                    const v1::SubmitJobRequest* req,
                                    v1::SubmitJobResponse* resp) {
  if (req->dry_run()) {
    absl::StatusOr<v1::SubmitJobResponse> dry =
        jobs_.DryRun(req->spec_text(), req->resume_from());
    if (!dry.ok()) return ToGrpcStatus(dry.status());
    *resp = *std::move(dry);
    return grpc::Status::OK;
  }
  absl::StatusOr<v1::Job> job =
      jobs_.Submit(req->spec_text(), false, req->resume_from());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *resp->mutable_job() = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobsService::GetJob(grpc::ServerContext*,
                                 const v1::GetJobRequest* req, v1::Job* resp) {
  absl::StatusOr<v1::Job> job = jobs_.Get(req->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *resp = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobsService::ListJobs(grpc::ServerContext*,
                                   const v1::ListJobsRequest* req,
                                   v1::ListJobsResponse* resp) {
  std::vector<v1::JobState> states;
  for (int s : req->states()) states.push_back(static_cast<v1::JobState>(s));
  for (auto& job : jobs_.List(states)) *resp->add_jobs() = std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobsService::CancelJob(grpc::ServerContext*,
                                    const v1::CancelJobRequest* req,
                                    v1::Job* resp) {
  absl::StatusOr<v1::Job> job = jobs_.Cancel(req->job_id(), req->reason());
  if (!job.ok()) return ToGrpcStatus(job.status());
  *resp = *std::move(job);
  return grpc::Status::OK;
}

grpc::Status JobsService::WatchJob(grpc::ServerContext* ctx,
                                   const v1::WatchJobRequest* req,
                                   grpc::ServerWriter<v1::JobEvent>* writer) {
  absl::StatusOr<v1::Job> job = jobs_.Get(req->job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  int64_t next = std::max<int64_t>(1, req->from_seq());
  while (!ctx->IsCancelled() && !stopping_.load()) {
    bool closed = false;
    std::vector<v1::JobEvent> batch =
        events_.WaitForEvents(req->job_id(), next, kWatchPollMs, &closed);
    for (const v1::JobEvent& event : batch) {
      if (!writer->Write(event)) return grpc::Status::OK;  // client left
      next = event.seq() + 1;
    }
    if (closed) return grpc::Status::OK;
  }
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "coordinator is shutting down; watch again to resume");
}

grpc::Status JobsService::ListWorkers(grpc::ServerContext*,
                                      const v1::ListWorkersRequest*,
                                      v1::ListWorkersResponse* resp) {
  for (auto& w : jobs_.Workers()) *resp->add_workers() = std::move(w);
  return grpc::Status::OK;
}

grpc::Status JobsService::ListCheckpoints(grpc::ServerContext*,
                                          const v1::ListCheckpointsRequest* req,
                                          v1::ListCheckpointsResponse* resp) {
  absl::StatusOr<std::vector<v1::Checkpoint>> catalog =
      jobs_.Checkpoints(req->job_id());
  if (!catalog.ok()) return ToGrpcStatus(catalog.status());
  for (auto& c : *catalog) *resp->add_checkpoints() = std::move(c);
  return grpc::Status::OK;
}

}  // namespace trainctl::coordinator
