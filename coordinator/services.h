#pragma once

// The three gRPC services of the coordinator. Handlers only translate
// between protos and the subsystems, and map absl::Status to grpc::Status.
// They run on gRPC's synchronous server threads; the long waits (watch,
// rendezvous, the agent stream) hold their thread and end on shutdown.

#include <atomic>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "coordinator/auth/authenticator.h"
#include "coordinator/auth/worker_enrollment.h"
#include "coordinator/event_hub.h"
#include "coordinator/file_store.h"
#include "coordinator/job_manager.h"
#include "coordinator/rendezvous.h"
#include "coordinator/server_build.h"
#include "trainctl/v1/jobs.grpc.pb.h"
#include "trainctl/v1/rendezvous.grpc.pb.h"
#include "trainctl/v1/workers.grpc.pb.h"

namespace trainctl::coordinator {

// Who may submit TorchScript jobs (--torchscript).
enum class TorchScriptPolicy { kAllow, kAdmins, kRefuse };

// PERMISSION_DENIED naming model.type for a TorchScript spec `policy` does
// not allow `caller` (an invalid spec is left to JobManager to explain).
absl::Status CheckModelAllowed(TorchScriptPolicy policy,
                               const auth::Caller& caller,
                               const std::string& spec_text);

// OK when every relative file path of the spec is shipped and `caller`
// uploaded each shipped file (FileStore::CheckJobFiles); an invalid spec is
// left to JobManager to explain.
absl::Status CheckShippedFiles(const FileStore& files, const auth::Caller& caller,
                               const std::string& spec_text);


class JobsService final : public v1::Jobs::Service {
 public:
  JobsService(JobManager& jobs, EventHub& events, FileStore& files,
              const std::atomic<bool>& stopping,
              const auth::Authenticator& auth,
              TorchScriptPolicy torchscript = TorchScriptPolicy::kAllow,
              ServerBuild build = {})
      : jobs_(jobs),
        events_(events),
        files_(files),
        stopping_(stopping),
        auth_(auth),
        torchscript_(torchscript),
        build_(std::move(build)) {}

  grpc::Status SubmitJob(grpc::ServerContext*, const v1::SubmitJobRequest* req,
                         v1::SubmitJobResponse* resp) override;
  grpc::Status PutFile(grpc::ServerContext* ctx,
                       grpc::ServerReader<v1::PutFileRequest>* reader,
                       v1::PutFileResponse* resp) override;
  grpc::Status GetJob(grpc::ServerContext*, const v1::GetJobRequest* req,
                      v1::Job* resp) override;
  grpc::Status ListJobs(grpc::ServerContext*, const v1::ListJobsRequest* req,
                        v1::ListJobsResponse* resp) override;
  grpc::Status CancelJob(grpc::ServerContext*, const v1::CancelJobRequest* req,
                         v1::Job* resp) override;
  grpc::Status DeleteJob(grpc::ServerContext*, const v1::DeleteJobRequest* req,
                         v1::DeleteJobResponse* resp) override;
  grpc::Status WatchJob(grpc::ServerContext* ctx,
                        const v1::WatchJobRequest* req,
                        grpc::ServerWriter<v1::JobEvent>* writer) override;
  grpc::Status ListWorkers(grpc::ServerContext*,
                           const v1::ListWorkersRequest* req,
                           v1::ListWorkersResponse* resp) override;
  grpc::Status ListCheckpoints(grpc::ServerContext*,
                               const v1::ListCheckpointsRequest* req,
                               v1::ListCheckpointsResponse* resp) override;
  grpc::Status GetServerInfo(grpc::ServerContext*,
                             const v1::GetServerInfoRequest* req,
                             v1::ServerInfo* resp) override;
  grpc::Status GetQueue(grpc::ServerContext*, const v1::GetQueueRequest* req,
                        v1::GetQueueResponse* resp) override;
  grpc::Status SetJobPriority(grpc::ServerContext*,
                              const v1::SetJobPriorityRequest* req,
                              v1::Job* resp) override;
  grpc::Status GetHistory(grpc::ServerContext*, const v1::GetHistoryRequest* req,
                          v1::GetHistoryResponse* resp) override;
  grpc::Status WatchJobs(grpc::ServerContext* ctx, const v1::WatchJobsRequest* req,
                         grpc::ServerWriter<v1::WatchJobsResponse>* writer) override;

 private:
  // Counts an open watch stream against its client's limit; RESOURCE_EXHAUSTED
  // (naming `what` to end) at the limit. Release with EndWatch.
  absl::Status BeginWatch(const std::string& client, const char* what);
  void EndWatch(const std::string& client);
  // The job, when the calling person may touch it; `action` ("cancel",
  // "watch", ...) goes into the PERMISSION_DENIED message.
  absl::StatusOr<v1::Job> JobFor(const grpc::ServerContext& ctx,
                                 const std::string& job_id,
                                 const char* action) const;
  JobManager& jobs_;
  EventHub& events_;
  FileStore& files_;
  const std::atomic<bool>& stopping_;
  const auth::Authenticator& auth_;
  const TorchScriptPolicy torchscript_;
  const ServerBuild build_;
  // Open WatchJob streams per client (user, or peer host without
  // authentication): each holds a server thread, so one client may not
  // take them all.
  std::mutex watchers_mu_;
  std::map<std::string, int> watchers_;  // GUARDED_BY(watchers_mu_)
};

// The cluster CA's certificate and key, for signing joining workers'
// certificates; empty with --insecure (Join is then refused).
struct ClusterCa {
  std::string cert_pem;
  std::string key_pem;
  std::string workers_file;  // auth/workers: names certified, and their keys
};

// Join is synchronous; Connect runs on the callback API (agent_stream.h)
// so that connected nodes hold no server threads.
class WorkersService final
    : public v1::Workers::WithCallbackMethod_Connect<v1::Workers::Service> {
 public:
  WorkersService(JobManager& jobs, const auth::Authenticator& auth,
                 ClusterCa ca)
      : jobs_(jobs),
        auth_(auth),
        ca_(std::move(ca)),
        enrollment_(ca_.workers_file) {}

  grpc::ServerBidiReactor<v1::AgentMessage, v1::CoordinatorMessage>* Connect(
      grpc::CallbackServerContext* ctx) override;
  grpc::Status Join(grpc::ServerContext* ctx, const v1::JoinRequest* req,
                    v1::JoinResponse* resp) override;

 private:
  JobManager& jobs_;
  const auth::Authenticator& auth_;
  const ClusterCa ca_;
  auth::WorkerEnrollment enrollment_;
};

class RendezvousService final : public v1::Rendezvous::Service {
 public:
  RendezvousService(Rendezvous& store, const JobManager& jobs,
                    const FileStore& files, const auth::Authenticator& auth)
      : store_(store), jobs_(jobs), files_(files), auth_(auth) {}

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
  // Only a file the job's spec ships, to a rank of its current generation.
  grpc::Status FetchFile(grpc::ServerContext* ctx, const v1::FetchFileRequest* req,
                         grpc::ServerWriter<v1::FileChunk>* writer) override;
  // In-place recovery: the caller's place in the next generation, with
  // that generation's key.
  grpc::Status AwaitRegroup(grpc::ServerContext* ctx, const v1::AwaitRegroupRequest* req,
                            v1::AwaitRegroupResponse* resp) override;

 private:
  // OK when the call carries the key of `scope`'s generation.
  grpc::Status Admit(const grpc::ServerContext& ctx, const v1::Scope& scope) const;

  Rendezvous& store_;
  const JobManager& jobs_;
  const FileStore& files_;
  const auth::Authenticator& auth_;
};

}  // namespace trainctl::coordinator
