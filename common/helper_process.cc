#include "common/helper_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

extern char** environ;

namespace trainctl {
namespace {

bool IsExecutable(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         ::access(path.c_str(), X_OK) == 0;
}

// fork + exec rather than posix_spawn, for PR_SET_PDEATHSIG: a helper must
// not outlive a rank that crashes while it encodes a corpus (the agent
// kills a rank's process group, but a rank that dies by itself kills
// nothing). The signal follows the forking thread, which waits here for
// the child. Only async-signal-safe calls between fork and exec; a failed
// exec reports its errno through a close-on-exec pipe.
absl::StatusOr<pid_t> SpawnBoundToThisThread(const std::vector<char*>& args, int stdout_fd,
                                             int stderr_fd, const std::vector<int>& pass_fds) {
  int exec_pipe[2];
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  }
  // Above the descriptors the child numbers 3, 4, ..., like the copies.
  const int high = ::fcntl(exec_pipe[1], F_DUPFD_CLOEXEC, 64);
  ::close(exec_pipe[1]);
  exec_pipe[1] = high;
  if (high < 0) {
    ::close(exec_pipe[0]);
    return absl::InternalError(absl::StrCat("fcntl(F_DUPFD): ", strerror(errno)));
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(exec_pipe[0]);
    ::close(exec_pipe[1]);
    return absl::InternalError(absl::StrCat("fork: ", strerror(err)));
  }
  if (pid == 0) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the parent died before prctl
    int err = 0;
    const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd < 0 || ::dup2(null_fd, STDIN_FILENO) < 0 ||
        ::dup2(stdout_fd, STDOUT_FILENO) < 0 || ::dup2(stderr_fd, STDERR_FILENO) < 0) {
      err = errno;
    }
    for (size_t i = 0; err == 0 && i < pass_fds.size(); ++i) {
      if (::dup2(pass_fds[i], 3 + static_cast<int>(i)) < 0) err = errno;
    }
    if (err == 0) {
      ::execve(args[0], args.data(), environ);
      err = errno;
    }
    ssize_t ignored = ::write(exec_pipe[1], &err, sizeof err);
    (void)ignored;
    ::_exit(127);
  }
  ::close(exec_pipe[1]);
  int child_errno = 0;
  ssize_t got;
  while ((got = ::read(exec_pipe[0], &child_errno, sizeof child_errno)) < 0 && errno == EINTR) {
  }
  ::close(exec_pipe[0]);
  if (got == static_cast<ssize_t>(sizeof child_errno)) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run ", args[0], ": ", strerror(child_errno)));
  }
  return pid;
}

}  // namespace

std::string FindSiblingProgram(const std::string& name) {
  char self[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    std::string dir(self, static_cast<size_t>(n));
    dir.resize(dir.rfind('/') + 1);
    if (IsExecutable(dir + name)) return dir + name;
  }
  const char* path = getenv("PATH");
  for (absl::string_view dir : absl::StrSplit(path ? path : "", ':', absl::SkipEmpty())) {
    const std::string candidate = absl::StrCat(dir, "/", name);
    if (IsExecutable(candidate)) return candidate;
  }
  return "";
}

absl::StatusOr<ChildResult> RunChild(const std::vector<std::string>& argv,
                                     absl::Time deadline, bool separate_stdout,
                                     const std::vector<int>& pass_fds) {
  // Copies above the targets first: dup2 onto itself would keep a
  // descriptor's close-on-exec flag, and a target may be another's source.
  std::vector<int> copies;
  for (int fd : pass_fds) {
    copies.push_back(::fcntl(fd, F_DUPFD_CLOEXEC, 64));
    if (copies.back() < 0) {
      for (int c : copies) {
        if (c >= 0) ::close(c);
      }
      return absl::InternalError(absl::StrCat("fcntl(F_DUPFD): ", strerror(errno)));
    }
  }
  struct CloseCopies {
    std::vector<int>* fds;
    ~CloseCopies() {
      for (int fd : *fds) ::close(fd);
    }
  } close_copies{&copies};
  int err_pipe[2];
  int out_pipe[2] = {-1, -1};
  if (::pipe2(err_pipe, O_CLOEXEC) != 0 ||
      (separate_stdout && ::pipe2(out_pipe, O_CLOEXEC) != 0)) {
    return absl::InternalError(absl::StrCat("pipe: ", strerror(errno)));
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int stdout_fd = separate_stdout ? out_pipe[1] : err_pipe[1];
  absl::StatusOr<pid_t> spawned = SpawnBoundToThisThread(args, stdout_fd, err_pipe[1], copies);
  ::close(err_pipe[1]);
  if (separate_stdout) ::close(out_pipe[1]);
  if (!spawned.ok()) {
    ::close(err_pipe[0]);
    if (separate_stdout) ::close(out_pipe[0]);
    return spawned.status();
  }
  const pid_t pid = *spawned;
  ChildResult result;
  // Both pipes are drained together, so a child filling one never stalls.
  struct pollfd fds[2] = {{err_pipe[0], POLLIN, 0}, {out_pipe[0], POLLIN, 0}};
  std::string* sinks[2] = {&result.output, &result.stdout_text};
  int open_fds = separate_stdout ? 2 : 1;
  char buffer[4096];
  while (open_fds > 0) {
    int wait_ms = -1;
    if (deadline != absl::InfiniteFuture()) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) {
        ::kill(pid, SIGKILL);
        result.timed_out = true;
        break;
      }
      wait_ms = static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 60000));
    }
    const int ready = ::poll(fds, separate_stdout ? 2 : 1, wait_ms);
    if (ready < 0 && errno != EINTR) break;
    for (int i = 0; i < (separate_stdout ? 2 : 1) && ready > 0; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t got = ::read(fds[i].fd, buffer, sizeof buffer);
      if (got > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(got));
      } else if (got == 0 || errno != EINTR) {
        ::close(fds[i].fd);
        fds[i].fd = -1;  // poll ignores negative descriptors
        --open_fds;
      }
    }
  }
  for (const struct pollfd& fd : fds) {
    if (fd.fd >= 0) ::close(fd.fd);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  return result;
}

}  // namespace trainctl
