#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <string>

namespace trainctl::coordinator::auth {

// Holds an exclusive lock on `dir`/.lock while alive, so that two writers of
// a file in `dir` (the running coordinator, an admin's add-user or
// forget-worker) never lose each other's lines.
class DirLock {
 public:
  explicit DirLock(const std::string& dir)
      : fd_(open((dir + "/.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600)) {
    if (fd_ >= 0) flock(fd_, LOCK_EX);
  }
  ~DirLock() {
    if (fd_ >= 0) close(fd_);  // releases the lock
  }
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  bool ok() const { return fd_ >= 0; }

 private:
  int fd_;
};

}  // namespace trainctl::coordinator::auth
