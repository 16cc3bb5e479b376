#include "client/coordinator_client.h"

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/channel_arguments.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

#include "common/grpc_status.h"

namespace trainctl::client {
namespace {

// gRPC found no connection for the call, so it never left this process.
// Debian's gRPC 1.51 can take a connect still in progress for a failed one
// (grpc/grpc#35064: "No such file or directory"): such a call is made once
// more, waiting briefly for the channel.
bool FoundNoConnection(const grpc::Status& status) {
  return status.error_code() == grpc::StatusCode::UNAVAILABLE &&
         absl::StrContains(status.error_message(), "failed to connect");
}

}  // namespace

CoordinatorClient::CoordinatorClient(std::string address,
                                     ClientSecurity security,
                                     absl::Duration rpc_timeout)
    : address_(std::move(address)), rpc_timeout_(rpc_timeout) {
  grpc::ChannelArguments args;
  // gRPC's default reconnect backoff grows to 120 s, longer than watch's
  // whole retry window; keep it short so a restarted coordinator is seen
  // within seconds.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 500);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 500);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 4000);
  // `list --all` of an admin carries every job's spec: gRPC's 4 MiB default
  // made it fail once a few big jobs existed. The server sends up to this.
  args.SetMaxReceiveMessageSize(64 << 20);
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      grpc::InsecureChannelCredentials();
  if (!security.insecure) {
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = security.ca_pem;
    credentials = grpc::SslCredentials(tls);
    if (!security.token.empty()) {
      credentials = grpc::CompositeChannelCredentials(
          credentials, grpc::AccessTokenCredentials(security.token));
    }
  }
  channel_ = grpc::CreateCustomChannel(address_, credentials, args);
  stub_ = v1::Jobs::NewStub(channel_);
}

void CoordinatorClient::SetDeadline(grpc::ClientContext* context) const {
  context->set_deadline(absl::ToChronoTime(absl::Now() + rpc_timeout_));
}

template <typename Request, typename Response>
absl::StatusOr<Response> CoordinatorClient::Unary(
    grpc::Status (v1::Jobs::Stub::*method)(grpc::ClientContext*, const Request&,
                                           Response*),
    const Request& request) {
  Response response;
  grpc::ClientContext context;
  SetDeadline(&context);
  grpc::Status status = ((*stub_).*method)(&context, request, &response);
  if (FoundNoConnection(status)) {
    // A coordinator that is really down is still reported with the first
    // error, within seconds.
    grpc::ClientContext again;
    again.set_wait_for_ready(true);
    again.set_deadline(absl::ToChronoTime(
        absl::Now() + std::min(rpc_timeout_, kConnectRetryWindow)));
    const grpc::Status retried = ((*stub_).*method)(&again, request, &response);
    if (retried.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
      status = retried;
    }
  }
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

absl::StatusOr<v1::SubmitJobResponse> CoordinatorClient::SubmitJob(
    const std::string& spec_text, bool dry_run,
    const std::string& resume_from) {
  v1::SubmitJobRequest request;
  request.set_spec_text(spec_text);
  request.set_dry_run(dry_run);
  request.set_resume_from(resume_from);
  return Unary(&v1::Jobs::Stub::SubmitJob, request);
}

absl::StatusOr<v1::PutFileResponse> CoordinatorClient::PutFile(
    const std::string& path, const std::string& sha256, int64_t size) {
  const absl::Duration timeout = rpc_timeout_ + absl::Seconds(size >> 20);
  grpc::Status status;
  absl::StatusOr<v1::PutFileResponse> sent =
      PutFileOnce(path, sha256, size, timeout, /*wait_for_ready=*/false, &status);
  if (FoundNoConnection(status)) {
    grpc::Status again;
    absl::StatusOr<v1::PutFileResponse> resent = PutFileOnce(
        path, sha256, size, std::min(timeout, kConnectRetryWindow),
        /*wait_for_ready=*/true, &again);
    if (again.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) return resent;
  }
  return sent;
}

absl::StatusOr<v1::PutFileResponse> CoordinatorClient::PutFileOnce(
    const std::string& path, const std::string& sha256, int64_t size,
    absl::Duration timeout, bool wait_for_ready, grpc::Status* status) {
  std::ifstream in(path, std::ios::binary);
  if (!in.is_open()) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
  }
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  context.set_wait_for_ready(wait_for_ready);
  v1::PutFileResponse response;
  std::unique_ptr<grpc::ClientWriter<v1::PutFileRequest>> writer =
      stub_->PutFile(&context, &response);
  v1::PutFileRequest request;
  request.set_sha256(sha256);
  request.set_size(size);
  std::string buffer(1 << 20, '\0');
  bool first = true;
  // The coordinator answers at once for a file it has, and a write after
  // that fails: stop sending then, and read its answer.
  while (in || first) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    request.set_data(buffer.data(), static_cast<size_t>(in.gcount()));
    if (!writer->Write(request)) break;
    request.clear_sha256();
    request.clear_size();
    first = false;
  }
  writer->WritesDone();
  *status = writer->Finish();
  if (!status->ok()) return FromGrpcStatus(*status);
  return response;
}

absl::StatusOr<v1::ListCheckpointsResponse> CoordinatorClient::ListCheckpoints(
    const std::string& job_id) {
  v1::ListCheckpointsRequest request;
  request.set_job_id(job_id);
  return Unary(&v1::Jobs::Stub::ListCheckpoints, request);
}

absl::StatusOr<v1::Job> CoordinatorClient::GetJob(const std::string& job_id) {
  v1::GetJobRequest request;
  request.set_job_id(job_id);
  return Unary(&v1::Jobs::Stub::GetJob, request);
}

absl::StatusOr<v1::ListJobsResponse> CoordinatorClient::ListJobs(
    const std::vector<v1::JobState>& states) {
  v1::ListJobsRequest request;
  for (v1::JobState s : states) request.add_states(s);
  v1::ListJobsResponse all;
  do {  // page by page: a long history does not fit one message
    absl::StatusOr<v1::ListJobsResponse> page =
        Unary(&v1::Jobs::Stub::ListJobs, request);
    if (!page.ok()) return page.status();
    for (v1::Job& job : *page->mutable_jobs()) *all.add_jobs() = std::move(job);
    request.set_page_token(page->next_page_token());
  } while (!request.page_token().empty());
  return all;
}

absl::StatusOr<v1::GetHistoryResponse> CoordinatorClient::GetHistory(
    v1::GetHistoryRequest request) {
  request.clear_page_token();
  v1::GetHistoryResponse all;
  do {
    absl::StatusOr<v1::GetHistoryResponse> page =
        Unary(&v1::Jobs::Stub::GetHistory, request);
    if (!page.ok()) return page.status();
    for (v1::JobAccount& job : *page->mutable_jobs()) *all.add_jobs() = std::move(job);
    all.set_as_of_unix_ms(page->as_of_unix_ms());
    request.set_page_token(page->next_page_token());
  } while (!request.page_token().empty());
  return all;
}

absl::StatusOr<v1::Job> CoordinatorClient::CancelJob(
    const std::string& job_id, const std::string& reason) {
  v1::CancelJobRequest request;
  request.set_job_id(job_id);
  request.set_reason(reason);
  return Unary(&v1::Jobs::Stub::CancelJob, request);
}

absl::Status CoordinatorClient::DeleteJob(const std::string& job_id) {
  v1::DeleteJobRequest request;
  request.set_job_id(job_id);
  return Unary(&v1::Jobs::Stub::DeleteJob, request).status();
}

absl::StatusOr<v1::ListWorkersResponse> CoordinatorClient::ListWorkers() {
  return Unary(&v1::Jobs::Stub::ListWorkers, v1::ListWorkersRequest());
}

absl::StatusOr<v1::ServerInfo> CoordinatorClient::GetServerInfo() {
  return Unary(&v1::Jobs::Stub::GetServerInfo, v1::GetServerInfoRequest());
}

absl::StatusOr<v1::GetQueueResponse> CoordinatorClient::GetQueue() {
  return Unary(&v1::Jobs::Stub::GetQueue, v1::GetQueueRequest());
}

absl::StatusOr<v1::Job> CoordinatorClient::SetJobPriority(
    const std::string& job_id, const std::string& priority) {
  v1::SetJobPriorityRequest request;
  request.set_job_id(job_id);
  request.set_priority(priority);
  return Unary(&v1::Jobs::Stub::SetJobPriority, request);
}

absl::Status CoordinatorClient::AwaitConnection() {
  // A stream call fails at once while the channel is reconnecting, and with
  // TLS the failed call can abort the connection's handshake; so a
  // (re)started stream first lets the channel finish connecting.
  if (channel_->WaitForConnected(absl::ToChronoTime(absl::Now() + rpc_timeout_))) {
    return absl::OkStatus();
  }
  return absl::UnavailableError(absl::StrCat(
      "could not connect within ", absl::FormatDuration(rpc_timeout_)));
}

absl::Status CoordinatorClient::WatchJob(
    const std::string& job_id, int64_t from_seq,
    const std::function<void(const v1::JobEvent&)>& on_event) {
  return Watch(job_id, from_seq, /*follow=*/true, on_event);
}

absl::Status CoordinatorClient::WatchJobSnapshot(
    const std::string& job_id, int64_t from_seq,
    const std::function<void(const v1::JobEvent&)>& on_event) {
  return Watch(job_id, from_seq, /*follow=*/false, on_event);
}

absl::Status CoordinatorClient::WatchJobs(
    const std::vector<v1::JobState>& states,
    const std::function<bool(const v1::WatchJobsResponse&)>& on_response) {
  if (absl::Status connected = AwaitConnection(); !connected.ok()) {
    return connected;
  }
  v1::WatchJobsRequest request;
  for (v1::JobState s : states) request.add_states(s);
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::WatchJobsResponse>> reader =
      stub_->WatchJobs(&context, request);
  v1::WatchJobsResponse response;
  bool stopped = false;  // on_response asked to end
  while (reader->Read(&response)) {
    if (!on_response(response)) {
      stopped = true;
      context.TryCancel();
      break;
    }
  }
  absl::Status finished = FromGrpcStatus(reader->Finish());
  // Only our own cancel is the end asked for: a coordinator that is
  // shutting down cancels the call too, and that is a break.
  return stopped ? absl::OkStatus() : finished;
}

absl::Status CoordinatorClient::Watch(
    const std::string& job_id, int64_t from_seq, bool follow,
    const std::function<void(const v1::JobEvent&)>& on_event) {
  if (absl::Status connected = AwaitConnection(); !connected.ok()) {
    return connected;
  }
  v1::WatchJobRequest request;
  request.set_job_id(job_id);
  request.set_from_seq(from_seq);
  request.set_follow(follow);
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::JobEvent>> reader =
      stub_->WatchJob(&context, request);
  v1::JobEvent event;
  while (reader->Read(&event)) on_event(event);
  return FromGrpcStatus(reader->Finish());
}

}  // namespace trainctl::client
