#include "common/atomic_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/str_split.h"

namespace trainctl {
namespace {

absl::Status ErrnoError(const std::string& what, const std::string& path) {
  const int e = errno;
  std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(e));
  if (e == ENOENT) return absl::NotFoundError(message);
  if (e == EACCES || e == EPERM) return absl::PermissionDeniedError(message);
  if (e == ENOSPC || e == EDQUOT) return absl::ResourceExhaustedError(message);
  return absl::UnavailableError(message);
}

std::string DirOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string BaseOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

absl::Status WriteAll(int fd, const char* data, size_t size,
                      const std::string& path) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoError("cannot write", path);
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open directory", dir);
  const int rc = ::fsync(fd);
  ::close(fd);
  return rc == 0 ? absl::OkStatus() : ErrnoError("cannot fsync directory", dir);
}

}  // namespace

absl::Status WriteFileAtomically(const std::string& path,
                                 std::string_view bytes,
                                 const std::function<void()>& halfway) {
  AtomicWriteOptions options;
  options.halfway = halfway;
  return WriteFileAtomically(path, bytes, options);
}

absl::Status WriteFileAtomically(const std::string& path,
                                 std::string_view bytes,
                                 const AtomicWriteOptions& options) {
  // Two pieces, so that `halfway` runs after half of the bytes.
  const size_t half = bytes.size() / 2;
  return WriteFileAtomicallyStreamed(
      path,
      [&](const ByteSink& sink) {
        absl::Status status = sink(bytes.data(), half);
        if (!status.ok()) return status;
        return sink(bytes.data() + half, bytes.size() - half);
      },
      options);
}

absl::Status WriteFileAtomicallyStreamed(
    const std::string& path,
    const std::function<absl::Status(const ByteSink& sink)>& produce,
    const AtomicWriteOptions& options) {
  const std::string dir = DirOf(path);
  const std::string temp =
      absl::StrCat(dir, "/.", BaseOf(path), ".tmp-", ::getpid());
  ::unlink(temp.c_str());  // a leftover of a writer that died
  const int fd = ::open(temp.c_str(),
                        O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                        static_cast<mode_t>(options.mode));
  if (fd < 0) return ErrnoError("cannot create", temp);
  ::fchmod(fd, static_cast<mode_t>(options.mode));  // whatever the umask
  struct stat old;
  if (options.keep_owner && ::geteuid() == 0 &&
      ::stat(path.c_str(), &old) == 0) {
    (void)!::fchown(fd, old.st_uid, old.st_gid);
  }
  bool first = true;
  absl::Status status = produce([&](const void* data, size_t size) {
    absl::Status written = WriteAll(fd, static_cast<const char*>(data), size, temp);
    if (written.ok() && first && options.halfway) options.halfway();
    first = false;
    return written;
  });
  if (status.ok() && ::fsync(fd) != 0) status = ErrnoError("cannot fsync", temp);
  if (::close(fd) != 0 && status.ok()) status = ErrnoError("cannot close", temp);
  if (status.ok() && ::rename(temp.c_str(), path.c_str()) != 0) {
    status = ErrnoError(absl::StrCat("cannot rename ", temp, " to"), path);
  }
  if (!status.ok()) {
    ::unlink(temp.c_str());
    return status;
  }
  return SyncDir(dir);
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("cannot open", path);
  std::string out;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status error = ErrnoError("cannot read", path);
      ::close(fd);
      return error;
    }
    if (n == 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

absl::Status MakeDirs(const std::string& dir, unsigned mode) {
  std::string prefix;
  bool first = true;
  for (absl::string_view part : absl::StrSplit(dir, '/', absl::SkipEmpty())) {
    // Relative paths stay relative: only an absolute one starts at "/".
    if (!first || dir[0] == '/') prefix += '/';
    first = false;
    absl::StrAppend(&prefix, part);
    if (::mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST) {
      return ErrnoError("cannot create directory", prefix);
    }
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return ErrnoError("cannot stat", dir);
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " exists and is not a directory"));
  }
  return absl::OkStatus();
}

namespace {

// nftw calls back through a plain function: the first failure waits here.
thread_local std::string remove_tree_failure;

int RemoveEntry(const char* path, const struct stat*, int type, struct FTW*) {
  const int rc = type == FTW_DP ? ::rmdir(path) : ::unlink(path);
  if (rc != 0 && errno != ENOENT) {
    remove_tree_failure = absl::StrCat("cannot remove ", path, ": ", std::strerror(errno));
    return 1;  // stops the walk
  }
  return 0;
}

}  // namespace

absl::Status RemoveTree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    return errno == ENOENT ? absl::OkStatus() : ErrnoError("cannot stat", path);
  }
  remove_tree_failure.clear();
  // Depth first (children before their directory), never through a symlink.
  if (::nftw(path.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS) != 0) {
    return absl::InternalError(remove_tree_failure.empty()
                                   ? absl::StrCat("cannot walk ", path, ": ", std::strerror(errno))
                                   : remove_tree_failure);
  }
  return absl::OkStatus();
}

int RemoveStaleTemporaries(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return 0;
  int removed = 0;
  while (const dirent* entry = ::readdir(d)) {
    const std::string name = entry->d_name;
    if (name.size() > 1 && name[0] == '.' && absl::StrContains(name, ".tmp-") &&
        ::unlink(absl::StrCat(dir, "/", name).c_str()) == 0) {
      ++removed;
    }
  }
  ::closedir(d);
  return removed;
}

bool IsInsideDir(const std::string& path, const std::string& dir) {
  auto normalize = [](const std::string& p) {
    std::vector<std::string> parts;
    for (absl::string_view part : absl::StrSplit(p, '/', absl::SkipEmpty())) {
      if (part == ".") continue;
      if (part == "..") {
        if (!parts.empty()) parts.pop_back();
        continue;
      }
      parts.emplace_back(part);
    }
    return parts;
  };
  if (path.empty() || dir.empty() || path[0] != '/' || dir[0] != '/') {
    return false;
  }
  const std::vector<std::string> p = normalize(path);
  const std::vector<std::string> d = normalize(dir);
  if (p.size() < d.size()) return false;
  for (size_t i = 0; i < d.size(); ++i) {
    if (p[i] != d[i]) return false;
  }
  return true;
}

}  // namespace trainctl
