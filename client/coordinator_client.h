#pragma once

// Thin synchronous wrapper over the Jobs stub: grpc::Status becomes
// absl::Status and every unary call gets a deadline.

#include <grpcpp/channel.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "trainctl/v1/jobs.grpc.pb.h"

namespace trainctl::client {

// How the CLI talks to the coordinator: TLS verified against the cluster CA
// with a bearer token on every call, or plaintext with --insecure.
struct ClientSecurity {
  bool insecure = true;
  std::string ca_pem;  // the cluster CA; empty = the system's roots
  std::string token;   // sent as "authorization: Bearer TOKEN"
};

class CoordinatorClient {
 public:
  // Connects lazily; nothing is sent until the first call.
  explicit CoordinatorClient(std::string address, ClientSecurity security = {},
                             absl::Duration rpc_timeout = absl::Seconds(10));

  const std::string& address() const { return address_; }

  // resume_from: "JOB" or "JOB:STEP" (empty: start fresh).
  absl::StatusOr<v1::SubmitJobResponse> SubmitJob(
      const std::string& spec_text, bool dry_run,
      const std::string& resume_from = "");
  // Uploads the file at `path` (this machine) announced as sha256/size, in
  // 1 MiB messages; the deadline grows with the size (1 MiB/s at least).
  absl::StatusOr<v1::PutFileResponse> PutFile(const std::string& path,
                                              const std::string& sha256,
                                              int64_t size);
  absl::StatusOr<v1::Job> GetJob(const std::string& job_id);
  absl::StatusOr<v1::ListJobsResponse> ListJobs(
      const std::vector<v1::JobState>& states);
  absl::StatusOr<v1::Job> CancelJob(const std::string& job_id,
                                    const std::string& reason);
  absl::Status DeleteJob(const std::string& job_id);
  absl::StatusOr<v1::ListWorkersResponse> ListWorkers();
  absl::StatusOr<v1::ServerInfo> GetServerInfo();
  absl::StatusOr<v1::GetQueueResponse> GetQueue();
  // list -w: calls on_response for each message of the stream until the
  // stream ends (the coordinator stops; never on its own otherwise) or
  // on_response returns false.
  absl::Status WatchJobs(
      const std::vector<v1::JobState>& states,
      const std::function<bool(const v1::WatchJobsResponse&)>& on_response);
  // Every page of the answer, in one response (page_token ignored).
  absl::StatusOr<v1::GetHistoryResponse> GetHistory(v1::GetHistoryRequest request);
  absl::StatusOr<v1::Job> SetJobPriority(const std::string& job_id,
                                         const std::string& priority);
  absl::StatusOr<v1::ListCheckpointsResponse> ListCheckpoints(
      const std::string& job_id);

  // Streams the job's events with seq >= from_seq to on_event until the
  // server ends the stream; returns the stream's final status. No deadline:
  // a watch lasts as long as the job.
  absl::Status WatchJob(
      const std::string& job_id, int64_t from_seq,
      const std::function<void(const v1::JobEvent&)>& on_event);

  // What the job has recorded so far: like WatchJob, but the stream ends
  // (OK) after the events the coordinator had published when the call
  // arrived (WatchJobRequest.follow = false).
  absl::Status WatchJobSnapshot(
      const std::string& job_id, int64_t from_seq,
      const std::function<void(const v1::JobEvent&)>& on_event);

 private:
  // OK once the channel is connected (bounded by the RPC timeout).
  absl::Status AwaitConnection();
  void SetDeadline(grpc::ClientContext* context) const;
  absl::Status Watch(const std::string& job_id, int64_t from_seq, bool follow,
                     const std::function<void(const v1::JobEvent&)>& on_event);
  // One unary Jobs call with the client's deadline: its response, or its
  // status as an absl::Status. A call that found no connection is made
  // once more, waiting up to kConnectRetryWindow for the channel.
  template <typename Request, typename Response>
  absl::StatusOr<Response> Unary(
      grpc::Status (v1::Jobs::Stub::*method)(grpc::ClientContext*,
                                             const Request&, Response*),
      const Request& request);

  // One upload of `path`; `status` is gRPC's, for PutFile's second try.
  absl::StatusOr<v1::PutFileResponse> PutFileOnce(const std::string& path,
                                                  const std::string& sha256,
                                                  int64_t size,
                                                  absl::Duration timeout,
                                                  bool wait_for_ready,
                                                  grpc::Status* status);

  static constexpr absl::Duration kConnectRetryWindow = absl::Seconds(2);

  std::string address_;
  absl::Duration rpc_timeout_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Jobs::Stub> stub_;
};

}  // namespace trainctl::client
