#include "common/helper_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
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
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, separate_stdout ? out_pipe[1] : err_pipe[1],
                                   STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  for (size_t i = 0; i < copies.size(); ++i) {
    posix_spawn_file_actions_adddup2(&actions, copies[i], 3 + static_cast<int>(i));
  }
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int spawned =
      posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(err_pipe[1]);
  if (separate_stdout) ::close(out_pipe[1]);
  if (spawned != 0) {
    ::close(err_pipe[0]);
    if (separate_stdout) ::close(out_pipe[0]);
    return absl::FailedPreconditionError(
        absl::StrCat("cannot run ", argv[0], ": ", strerror(spawned)));
  }
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
