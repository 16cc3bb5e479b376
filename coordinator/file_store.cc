#include "coordinator/file_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/file_digest.h"
#include "common/log.h"

namespace trainctl::coordinator {
namespace {

std::string MiB(int64_t bytes) {
  return absl::StrCat((bytes + (1 << 20) - 1) >> 20, " MiB");
}

// One line per owner; "-" stands for the empty name of an --insecure
// coordinator, which no real user name can be.
std::string OwnerLine(const std::string& owner) {
  return owner.empty() ? "-" : owner;
}

}  // namespace

FileStore::FileStore(std::string dir, int64_t max_file_bytes)
    : dir_(std::move(dir)), max_file_bytes_(max_file_bytes) {
  if (absl::Status s = MakeDirs(dir_, 0700); !s.ok()) {
    TLOG_ERROR << "shipped files: " << s.message();
  }
}

std::string FileStore::BlobPath(const std::string& sha256) const {
  return absl::StrCat(dir_, "/", sha256);
}

std::string FileStore::OwnersPath(const std::string& sha256) const {
  return absl::StrCat(dir_, "/", sha256, ".owners");
}

bool FileStore::OwnsLocked(const std::string& owner, const std::string& sha256) const {
  if (access(BlobPath(sha256).c_str(), R_OK) != 0) return false;
  absl::StatusOr<std::string> owners = ReadWholeFile(OwnersPath(sha256));
  if (!owners.ok()) return false;
  for (absl::string_view line : absl::StrSplit(*owners, '\n')) {
    if (line == OwnerLine(owner)) return true;
  }
  return false;
}

absl::StatusOr<bool> FileStore::Put(
    const std::string& owner, const std::string& sha256, int64_t size,
    const std::function<absl::Status(const ByteSink&)>& produce) {
  if (!IsSha256Hex(sha256)) {
    return absl::InvalidArgumentError("sha256: must be 64 lowercase hex digits");
  }
  if (size < 0 || size > max_file_bytes_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a file of ", size, " bytes is over this coordinator's limit of ",
        MiB(max_file_bytes_), " a file (its --max-file-mb); put it where the "
        "workers can read it and give its absolute path"));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (OwnsLocked(owner, sha256)) {
      // Uploaded again: the sweep counts its age from now.
      utimensat(AT_FDCWD, BlobPath(sha256).c_str(), nullptr, 0);
      return true;
    }
  }
  // Each upload under a name of its own, renamed to the digest once it is
  // whole and checked: two uploads of one content never share a file, and
  // neither waits for the other.
  const std::string staging =
      absl::StrCat(dir_, "/.upload-", next_upload_.fetch_add(1), "-", getpid());

  int64_t received = 0;
  Sha256Digest digest;
  AtomicWriteOptions options;
  options.mode = 0600;
  absl::Status written = WriteFileAtomicallyStreamed(
      staging,
      [&](const ByteSink& sink) -> absl::Status {
        ByteSink counted = [&](const void* data, size_t n) -> absl::Status {
          received += static_cast<int64_t>(n);
          if (received > size) {
            return absl::InvalidArgumentError(absl::StrCat(
                "the upload is longer than the ", size, " bytes announced"));
          }
          digest.Update(absl::string_view(static_cast<const char*>(data), n));
          return sink(data, n);
        };
        if (absl::Status s = produce(counted); !s.ok()) return s;
        if (received != size) {
          return absl::InvalidArgumentError(absl::StrCat(
              "the upload ended after ", received, " of the ", size,
              " bytes announced"));
        }
        if (digest.Hex() != sha256) {
          return absl::InvalidArgumentError(
              "the content's sha256 is not the one announced; nothing was kept");
        }
        return absl::OkStatus();
      },
      options);
  if (!written.ok()) return written;
  std::lock_guard<std::mutex> lock(mu_);
  if (::rename(staging.c_str(), BlobPath(sha256).c_str()) != 0) {
    const int error = errno;
    unlink(staging.c_str());
    return absl::UnavailableError(absl::StrCat("cannot keep the upload in ", dir_, ": ",
                                               std::strerror(error)));
  }
  std::string owners;
  if (absl::StatusOr<std::string> old = ReadWholeFile(OwnersPath(sha256)); old.ok()) {
    owners = *std::move(old);
  }
  owners += OwnerLine(owner) + "\n";
  AtomicWriteOptions owners_options;
  owners_options.mode = 0600;
  if (absl::Status s = WriteFileAtomically(OwnersPath(sha256), owners, owners_options);
      !s.ok()) {
    return s;
  }
  return false;
}

absl::Status FileStore::CheckJobFiles(const std::string& owner,
                                      const v1::JobSpec& spec) const {
  std::lock_guard<std::mutex> lock(mu_);
  for (const v1::ShippedFile& file : spec.shipped_files()) {
    struct stat st {};
    if (stat(BlobPath(file.sha256()).c_str(), &st) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          file.field(), ": '", file.path(), "' (sha256 ", file.sha256().substr(0, 12),
          "...) was not uploaded to this coordinator; trainctl submit uploads it"));
    }
    // Named now: the sweep counts the hour from here, so a file cannot go
    // between this check and the job's record.
    utimensat(AT_FDCWD, BlobPath(file.sha256()).c_str(), nullptr, 0);
    if (!OwnsLocked(owner, file.sha256())) {
      return absl::PermissionDeniedError(absl::StrCat(
          file.field(), ": '", file.path(), "' names a file ",
          owner.empty() ? "this coordinator" : owner,
          " did not upload; a job ships only its owner's uploads"));
    }
    if (st.st_size != file.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shipped_files: ", file.field(), " says ", file.size(),
          " bytes, the uploaded file has ", st.st_size));
    }
  }
  return absl::OkStatus();
}

absl::Status FileStore::Read(const std::string& sha256, size_t chunk_bytes,
                             const std::function<bool(absl::string_view)>& chunk) const {
  if (!IsSha256Hex(sha256)) {
    return absl::InvalidArgumentError("sha256: must be 64 lowercase hex digits");
  }
  std::ifstream in(BlobPath(sha256), std::ios::binary);
  if (!in.is_open()) {
    return absl::NotFoundError(absl::StrCat("no shipped file ", sha256.substr(0, 12),
                                            "... is kept"));
  }
  std::string buffer(chunk_bytes, '\0');
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    const size_t n = static_cast<size_t>(in.gcount());
    if (n == 0) break;
    if (!chunk(absl::string_view(buffer.data(), n))) return absl::OkStatus();
  }
  if (in.bad()) {
    return absl::DataLossError(absl::StrCat("cannot read shipped file ",
                                            sha256.substr(0, 12), "..."));
  }
  return absl::OkStatus();
}

int FileStore::Sweep(const std::set<std::string>& referenced,
                     std::chrono::seconds min_age) {
  std::lock_guard<std::mutex> lock(mu_);
  DIR* d = opendir(dir_.c_str());
  if (d == nullptr) return 0;
  const time_t cutoff = time(nullptr) - static_cast<time_t>(min_age.count());
  int removed = 0;
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    const bool blob = IsSha256Hex(name);
    // Uploads cut off (a dead client, a killed coordinator).
    const bool temporary = name.size() > 1 && name[0] == '.' &&
                           (name.find(".tmp-") != std::string::npos ||
                            name.rfind(".upload-", 0) == 0);
    if ((!blob && !temporary) || (blob && referenced.count(name) > 0)) continue;
    struct stat st {};
    const std::string path = absl::StrCat(dir_, "/", name);
    if (stat(path.c_str(), &st) != 0 || st.st_mtime > cutoff) continue;
    if (unlink(path.c_str()) == 0) {
      ++removed;
      if (blob) unlink(OwnersPath(name).c_str());
    }
  }
  closedir(d);
  return removed;
}

}  // namespace trainctl::coordinator
