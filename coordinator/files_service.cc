// The handlers of shipped files: Jobs.PutFile (a person uploads a file a
// spec names by a relative path), the submit-time check, and
// Rendezvous.FetchFile (a rank of the job downloads it).

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/grpc_status.h"
#include "common/shipped_files.h"
#include "common/spec.h"
#include "coordinator/services.h"

namespace trainctl::coordinator {
namespace {

// Pieces well under every receive limit on the way (the coordinator's and
// the rank's).
constexpr size_t kChunkBytes = 1 << 20;

}  // namespace

absl::Status CheckShippedFiles(const FileStore& files, const auth::Caller& caller,
                               const std::string& spec_text) {
  absl::StatusOr<v1::JobSpec> spec = ParseJobSpec(spec_text);
  if (!spec.ok()) return absl::OkStatus();
  std::vector<std::string> unshipped = UnshippedRelativePaths(*spec);
  if (!unshipped.empty()) {
    return absl::InvalidArgumentError(absl::StrJoin(unshipped, "\n"));
  }
  return files.CheckJobFiles(caller.name, *spec);
}

grpc::Status JobsService::PutFile(grpc::ServerContext* ctx,
                                  grpc::ServerReader<v1::PutFileRequest>* reader,
                                  v1::PutFileResponse* resp) {
  absl::StatusOr<auth::Caller> caller = auth_.Person(*ctx);
  if (!caller.ok()) return ToGrpcStatus(caller.status());
  v1::PutFileRequest first;
  if (!reader->Read(&first)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "PutFile: the stream ended before its first message");
  }
  // Copies: `first` moves into the reading loop below.
  const std::string sha256 = first.sha256();
  const int64_t size = first.size();
  absl::StatusOr<bool> already = files_.Put(
      caller->name, sha256, size,
      [&](const ByteSink& sink) -> absl::Status {
        v1::PutFileRequest next = std::move(first);
        do {
          if (stopping_.load()) {
            return absl::UnavailableError("the coordinator is stopping; upload again");
          }
          const std::string& data = next.data();
          if (!data.empty()) {
            if (absl::Status s = sink(data.data(), data.size()); !s.ok()) return s;
          }
        } while (reader->Read(&next));
        return absl::OkStatus();
      });
  if (!already.ok()) return ToGrpcStatus(already.status());
  resp->set_sha256(sha256);
  resp->set_size(size);
  resp->set_already_stored(*already);
  return grpc::Status::OK;
}

grpc::Status RendezvousService::FetchFile(grpc::ServerContext* ctx,
                                          const v1::FetchFileRequest* req,
                                          grpc::ServerWriter<v1::FileChunk>* writer) {
  if (auto s = Admit(*ctx, req->scope()); !s.ok()) return s;
  absl::StatusOr<v1::Job> job = jobs_.Get(req->scope().job_id());
  if (!job.ok()) return ToGrpcStatus(job.status());
  if (req->scope().generation() != job->generation()) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat("job ", job->id(), " is at generation ", job->generation(),
                                     ", not ", req->scope().generation()));
  }
  const auto& shipped = job->spec().shipped_files();
  if (std::none_of(shipped.begin(), shipped.end(), [&](const v1::ShippedFile& f) {
        return f.sha256() == req->sha256();
      })) {
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        absl::StrCat("job ", job->id(), " ships no file with sha256 ",
                                     req->sha256().substr(0, 64)));
  }
  v1::FileChunk chunk;
  bool delivered = true;
  absl::Status read = files_.Read(req->sha256(), kChunkBytes, [&](absl::string_view data) {
    chunk.set_data(data.data(), data.size());
    delivered = writer->Write(chunk);
    return delivered;
  });
  if (!read.ok()) return ToGrpcStatus(read);
  if (!delivered) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "the rank left during the download");
  }
  return grpc::Status::OK;
}

}  // namespace trainctl::coordinator
