#pragma once

// The three gRPC services of the coordinator. Handlers only translate
// between protos and the subsystems, and map absl::Status to grpc::Status.
// They run on gRPC's synchronous server threads; the long waits (watch,
// rendezvous, the agent stream) hold their thread and end on shutdown.

#include <atomic>

#include "coordinator/event_hub.h"
#include "coordinator/job_manager.h"
#include "coordinator/rendezvous.h"
#include "trainctl/v1/jobs.grpc.pb.h"
#include "trainctl/v1/rendezvous.grpc.pb.h"
#include "trainctl/v1/workers.grpc.pb.h"

namespace trainctl::coordinator {

class JobsService final : public v1::Jobs::Service {
 public:
  JobsService(JobManager& jobs, EventHub& events,
              const std::atomic<bool>& stopping)
      : jobs_(jobs), events_(events), stopping_(stopping) {}

  grpc::Status SubmitJob(grpc::ServerContext*, const v1::SubmitJobRequest* req,
                         v1::SubmitJobResponse* resp) override;
  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest* req,
                      v1::Job* resp) override;
  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest* req,
                        v1::ListJobsResponse* resp) override;
  grpc::Status CancelJob(grpc::ServerContext*, const v1::CancelJobRequest* req,
                         v1::Job* resp) override;
  grpc::Status WatchJob(grpc::ServerContext* ctx,
                        const v1::WatchJobRequest* req,
                        grpc::ServerWriter<v1::JobEvent>* writer) override;
  grpc::Status ListWorkers(grpc::ServerContext*,
                           const v1::ListWorkersRequest* req,
                           v1::ListWorkersResponse* resp) override;
  grpc::Status ListCheckpoints(grpc::ServerContext*,
                               const v1::ListCheckpointsRequest* req,
                               v1::ListCheckpointsResponse* resp) override;

 private:
  JobManager& jobs_;
  EventHub& events_;
  const std::atomic<bool>& stopping_;
};

class WorkersService final : public v1::Workers::Service {
 public:
  explicit WorkersService(JobManager& jobs) : jobs_(jobs) {}

  grpc::Status Connect(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<v1::CoordinatorMessage, v1::AgentMessage>*
          stream) override;

 private:
  JobManager& jobs_;
};

class RendezvousService final : public v1::Rendezvous::Service {
 public:
  explicit RendezvousService(Rendezvous& store) : store_(store) {}

  grpc::Status Set(grpc::ServerContext*, const v1::SetRequest* req,
                   v1::SetResponse*) override;
  grpc::Status Get(grpc::ServerContext*, const v1::GetRequest* req,
                   v1::GetResponse* resp) override;
  grpc::Status Add(grpc::ServerContext*, const v1::AddRequest* req,
                   v1::AddResponse* resp) override;
  grpc::Status CompareSet(grpc::ServerContext*,
                          const v1::CompareSetRequest* req,
                          v1::CompareSetResponse* resp) override;
  grpc::Status Check(grpc::ServerContext*, const v1::CheckRequest* req,
                     v1::CheckResponse* resp) override;
  grpc::Status Wait(grpc::ServerContext*, const v1::WaitRequest* req,
                    v1::WaitResponse*) override;
  grpc::Status Delete(grpc::ServerContext*, const v1::DeleteRequest* req,
                      v1::DeleteResponse* resp) override;
  grpc::Status NumKeys(grpc::ServerContext*, const v1::NumKeysRequest* req,
                       v1::NumKeysResponse* resp) override;

 private:
  Rendezvous& store_;
};

}  // namespace trainctl::coordinator
