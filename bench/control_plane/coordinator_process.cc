#include "bench/control_plane/coordinator_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

extern char** environ;

namespace trainctl::bench {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

ProcessSample SampleProc(const std::string& dir) {
  ProcessSample sample;
  const std::string stat = ReadFile(dir + "/stat");
  // Fields after the command name, which is in parentheses and may hold
  // spaces: state is field 3, utime 14, stime 15.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return sample;
  std::vector<std::string> fields =
      absl::StrSplit(stat.substr(close + 2), ' ', absl::SkipEmpty());
  int64_t utime = 0, stime = 0;
  if (fields.size() > 13 && absl::SimpleAtoi(fields[11], &utime) &&
      absl::SimpleAtoi(fields[12], &stime)) {
    sample.cpu_seconds =
        static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
  }
  for (absl::string_view line :
       absl::StrSplit(ReadFile(dir + "/status"), '\n')) {
    auto number = [&line](absl::string_view key, int64_t* out) {
      if (!absl::ConsumePrefix(&line, key)) return;
      line = absl::StripAsciiWhitespace(line);
      absl::ConsumeSuffix(&line, " kB");
      (void)absl::SimpleAtoi(line, out);
    };
    int64_t threads = -1;
    number("VmRSS:", &sample.rss_kib);
    number("VmHWM:", &sample.peak_rss_kib);
    number("Threads:", &threads);
    if (threads >= 0) sample.threads = static_cast<int>(threads);
  }
  return sample;
}

// Runs argv to completion; its stdout in *out. False when it did not exit 0.
bool RunToEnd(const std::vector<std::string>& argv, std::string* out) {
  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) return false;
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  const int spawned =
      posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  if (spawned != 0) {
    close(pipe_fds[0]);
    return false;
  }
  char buf[4096];
  ssize_t n;
  while ((n = read(pipe_fds[0], buf, sizeof buf)) > 0) out->append(buf, n);
  close(pipe_fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

}  // namespace

ProcessSample SampleProcess(pid_t pid) {
  return SampleProc(absl::StrCat("/proc/", pid));
}
ProcessSample SampleSelf() { return SampleProc("/proc/self"); }

CoordinatorProcess::CoordinatorProcess(std::string binary,
                                       std::string state_dir,
                                       std::vector<std::string> extra_flags)
    : binary_(std::move(binary)),
      state_dir_(std::move(state_dir)),
      extra_flags_(std::move(extra_flags)) {}

CoordinatorProcess::~CoordinatorProcess() { Stop(); }

absl::Status CoordinatorProcess::Init(const std::vector<std::string>& admin_users,
                                      std::vector<std::string>* tokens) {
  std::string ignored;
  if (!RunToEnd({binary_, "init", "--state-dir", state_dir_}, &ignored)) {
    return absl::InternalError(
        absl::StrCat(binary_, " init --state-dir ", state_dir_, " failed"));
  }
  for (const std::string& user : admin_users) {
    std::string out;
    if (!RunToEnd({binary_, "add-user", user, "--admin", "--state-dir",
                   state_dir_},
                  &out)) {
      return absl::InternalError(absl::StrCat("add-user ", user, " failed"));
    }
    // The token is the output's last word.
    std::vector<std::string> words =
        absl::StrSplit(out, absl::ByAnyChar(" \n\t"), absl::SkipEmpty());
    if (words.empty()) {
      return absl::InternalError(absl::StrCat("add-user ", user, " printed nothing"));
    }
    tokens->push_back(words.back());
  }
  return absl::OkStatus();
}

absl::Status CoordinatorProcess::Start(int port) {
  ++starts_;
  const std::string port_file = absl::StrCat(state_dir_, "/bench.port");
  unlink(port_file.c_str());
  std::vector<std::string> argv{binary_, "--listen",
                                absl::StrCat("127.0.0.1:", port), "--port-file",
                                port_file, "--state-dir", state_dir_};
  argv.insert(argv.end(), extra_flags_.begin(), extra_flags_.end());
  const std::string log = absl::StrCat(state_dir_, "/coordinator-", starts_, ".log");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int spawned =
      posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    pid_ = -1;
    return absl::InternalError(absl::StrCat("cannot start ", binary_));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string text = ReadFile(port_file);
    if (!text.empty() && text.back() == '\n' &&
        absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &port_)) {
      return absl::OkStatus();
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::InternalError(
          absl::StrCat("the coordinator exited at start; see ", log));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("the coordinator wrote no port in 30 s; see ", log));
}

void CoordinatorProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

void CoordinatorProcess::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

std::string CoordinatorProcess::address() const {
  return absl::StrCat("127.0.0.1:", port_);
}

std::string CoordinatorProcess::ReadStateFile(const std::string& relative) const {
  return std::string(
      absl::StripAsciiWhitespace(ReadFile(state_dir_ + "/" + relative)));
}

}  // namespace trainctl::bench
