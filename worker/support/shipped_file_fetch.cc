#include "worker/support/shipped_file_fetch.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>

#include <grpcpp/client_context.h>

#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/file_digest.h"
#include "common/grpc_status.h"
#include "common/shipped_files.h"

namespace trainctl::train {
namespace {

constexpr time_t kUnusedFor = 7 * 24 * 3600;

// Downloads into a temporary name beside `path`, checks size and digest,
// then renames: another rank of the node may be doing the same.
absl::Status Download(const v1::ShippedFile& file, const ShippedFileSource& source,
                      const std::string& path) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + source.timeout);
  ctx.set_wait_for_ready(true);
  ctx.AddMetadata("x-trainctl-rendezvous-key", source.rendezvous_key);
  v1::FetchFileRequest request;
  *request.mutable_scope() = source.scope;
  request.set_sha256(file.sha256());
  std::unique_ptr<grpc::ClientReaderInterface<v1::FileChunk>> reader =
      source.stub->FetchFile(&ctx, request);
  Sha256Digest digest;
  int64_t received = 0;
  AtomicWriteOptions options;
  options.mode = 0644;
  return WriteFileAtomicallyStreamed(
      path,
      [&](const ByteSink& sink) -> absl::Status {
        v1::FileChunk chunk;
        while (reader->Read(&chunk)) {
          received += static_cast<int64_t>(chunk.data().size());
          if (received > file.size()) break;
          digest.Update(chunk.data());
          if (absl::Status s = sink(chunk.data().data(), chunk.data().size()); !s.ok()) {
            ctx.TryCancel();
            return s;
          }
        }
        if (received > file.size()) {
          ctx.TryCancel();
          reader->Finish();
          return absl::DataLossError("the coordinator sent more bytes than the spec lists");
        }
        if (absl::Status s = FromGrpcStatus(reader->Finish()); !s.ok()) {
          return absl::Status(s.code(), absl::StrCat("cannot fetch it from the coordinator: ",
                                                     s.message()));
        }
        if (received != file.size() || digest.Hex() != file.sha256()) {
          return absl::DataLossError(
              "the fetched copy is not the uploaded file (size or sha256 differ)");
        }
        return absl::OkStatus();
      },
      options);
}

// Deletes copies (and dead downloads) no rank used for a week.
void DropUnused(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  const time_t cutoff = time(nullptr) - kUnusedFor;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    const std::string path = dir + "/" + name;
    struct stat st {};
    if (stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_mtime < cutoff) {
      unlink(path.c_str());
    }
  }
  closedir(d);
}

}  // namespace

absl::Status FetchShippedFiles(v1::JobSpec* spec, const ShippedFileSource& source) {
  if (spec->shipped_files().empty()) return absl::OkStatus();
  if (absl::Status made = MakeDirs(source.cache_dir, 0755); !made.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("shipped files: ", made.message(), " (the worker's --data-cache-dir)"));
  }
  // Another user able to plant files here could swap a job's model.
  struct stat dir {};
  if (::lstat(source.cache_dir.c_str(), &dir) != 0 || !S_ISDIR(dir.st_mode) ||
      dir.st_uid != ::geteuid() || (dir.st_mode & 022) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shipped files: ", source.cache_dir, " must be a directory of uid ", ::geteuid(),
        " writable by no one else (the worker's --data-cache-dir)"));
  }
  for (const v1::ShippedFile& file : spec->shipped_files()) {
    std::string* field = MutableSpecFilePath(spec, file.field());
    if (field == nullptr || !IsSha256Hex(file.sha256())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shipped_files: '", file.field(), "' is not a shipped file field"));
    }
    const std::string where = absl::StrCat(file.field(), ": ", file.path());
    const std::string path = absl::StrCat(source.cache_dir, "/", file.sha256());
    // A copy is checked at each use: a partial or altered file must not
    // train in place of the uploaded one.
    absl::StatusOr<std::string> cached = Sha256OfFile(path);
    if (!cached.ok() || *cached != file.sha256()) {
      if (absl::Status s = Download(file, source, path); !s.ok()) {
        return absl::Status(s.code(), absl::StrCat(where, ": ", s.message()));
      }
    } else {
      utimensat(AT_FDCWD, path.c_str(), nullptr, 0);  // used now
    }
    *field = path;
  }
  DropUnused(source.cache_dir);
  return absl::OkStatus();
}

}  // namespace trainctl::train
