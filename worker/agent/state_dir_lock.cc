#include "worker/agent/state_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/ascii.h"
#include "common/atomic_file.h"

namespace trainctl::agent {
namespace {

// The pid the holder wrote into the lock file, or "unknown".
std::string HolderPid(int fd) {
  char buf[32] = {};
  const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  int pid = 0;
  if (n > 0 && absl::SimpleAtoi(absl::StripAsciiWhitespace(
                                    std::string(buf, static_cast<size_t>(n))),
                                &pid)) {
    return absl::StrCat(pid);
  }
  return "unknown";
}

}  // namespace

absl::StatusOr<StateDirLock> StateDirLock::Acquire(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    // Its parents as usual; the directory itself private, as joining makes it.
    const size_t slash = dir.find_last_of('/');
    if (slash != std::string::npos && slash > 0) {
      if (absl::Status s = MakeDirs(dir.substr(0, slash)); !s.ok()) {
        return absl::UnavailableError(
            absl::StrCat("--state-dir ", dir, ": ", s.message()));
      }
    }
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
      return absl::UnavailableError(absl::StrCat(
          "--state-dir ", dir, ": cannot create it: ", std::strerror(errno)));
    }
  }
  const std::string path = dir + "/worker.lock";
  // Close-on-exec: a rank must not inherit (and so extend) the lock.
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat(
        "--state-dir ", dir, ": cannot open ", path, ": ", std::strerror(errno)));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    const std::string holder = HolderPid(fd);
    close(fd);
    if (error == EWOULDBLOCK) {
      return absl::FailedPreconditionError(absl::StrCat(
          "--state-dir ", dir, " is in use by another trainctl-worker (pid ",
          holder, "); give each worker on a host its own --state-dir (the "
          "default is one per --name)"));
    }
    return absl::UnavailableError(absl::StrCat(
        "--state-dir ", dir, ": cannot lock ", path, ": ", std::strerror(error)));
  }
  const std::string pid = absl::StrCat(getpid(), "\n");
  if (ftruncate(fd, 0) != 0 ||
      pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    const int error = errno;
    close(fd);
    return absl::UnavailableError(absl::StrCat(
        "--state-dir ", dir, ": cannot write ", path, ": ", std::strerror(error)));
  }
  return StateDirLock(fd);
}

StateDirLock& StateDirLock::operator=(StateDirLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

StateDirLock::~StateDirLock() {
  if (fd_ >= 0) close(fd_);  // closing the only descriptor releases the flock
}

std::string DefaultWorkerStateDir(const std::string& name) {
  std::string component = name.empty() ? "default" : name;
  for (char& c : component) {
    if (c == '/') c = '_';
  }
  if (component == "." || component == "..") component = "_" + component;
  const char* xdg = getenv("XDG_STATE_HOME");
  if (xdg != nullptr && xdg[0] == '/') {
    return absl::StrCat(xdg, "/trainctl-worker/", component);
  }
  const char* home = getenv("HOME");
  return absl::StrCat(home != nullptr ? home : ".",
                      "/.local/state/trainctl-worker/", component);
}

}  // namespace trainctl::agent
