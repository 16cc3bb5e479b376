#include "tests/integration/pty_run.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>

namespace trainctl::testing {

using std::chrono::seconds;

PtyResult RunInPty(const std::vector<std::string>& argv, seconds timeout,
                   const std::string& prompt, const std::string& typed) {
  PtyResult result;
  winsize size{};
  size.ws_col = 100;
  size.ws_row = 30;
  int master = -1;
  const pid_t pid = forkpty(&master, nullptr, nullptr, &size);
  if (pid < 0) {
    ADD_FAILURE() << "forkpty: " << std::strerror(errno);
    return result;
  }
  if (pid == 0) {
    setenv("TERM", "xterm", 1);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  char buffer[4096];
  bool typed_done = typed.empty();
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd fd{master, POLLIN, 0};
    if (poll(&fd, 1, 200) <= 0) continue;
    const ssize_t n = read(master, buffer, sizeof buffer);
    if (n <= 0) break;  // EIO: the program exited and closed the terminal
    result.output.append(buffer, static_cast<size_t>(n));
    if (!typed_done && result.output.find(prompt) != std::string::npos) {
      typed_done = true;
      if (write(master, typed.data(), typed.size()) != static_cast<ssize_t>(typed.size())) {
        ADD_FAILURE() << "could not type into the terminal";
      }
    }
  }
  int status = 0;
  if (waitpid(pid, &status, WNOHANG) == 0) {
    // Still running at the deadline, or it closed the terminal early.
    const auto grace = std::chrono::steady_clock::now() + seconds(5);
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > grace) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        close(master);
        ADD_FAILURE() << "timed out; output so far:\n" << result.output;
        return result;
      }
      usleep(50'000);
    }
  }
  close(master);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
  return result;
}

}  // namespace trainctl::testing
