// RankProcess with real child processes (no coordinator): ranks outlive the
// thread that started them but not the agent process, their output reaches
// the agent as valid UTF-8, and the agent's secrets stay out of their reach.

#include "worker/agent/rank_process.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "trainctl/v1/workers.pb.h"
#include "worker/agent/process_hardening.h"
#include "common/utf8_sanitize.h"

namespace trainctl::agent {
namespace {

using std::chrono::seconds;

// What a rank's callbacks delivered, waited for with timeouts.
class Collector {
 public:
  RankProcess::Callbacks callbacks() {
    RankProcess::Callbacks cb;
    cb.on_line = [this](const std::string& stream, const std::string& line) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.emplace_back(stream, line);
      cv_.notify_all();
    };
    cb.on_exit = [this](int code, const std::string& error) {
      std::lock_guard<std::mutex> lock(mu_);
      exited_ = true;
      code_ = code;
      error_ = error;
      cv_.notify_all();
    };
    return cb;
  }
  bool WaitForLine(const std::string& text, seconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] {
      for (const auto& [stream, line] : lines_) {
        if (line == text) return true;
      }
      return exited_;
    }) && !exited_;
  }
  bool WaitForExit(seconds timeout) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, timeout, [&] { return exited_; });
  }
  std::vector<std::pair<std::string, std::string>> lines() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }
  int code() {
    std::lock_guard<std::mutex> lock(mu_);
    return code_;
  }
  std::string error() {
    std::lock_guard<std::mutex> lock(mu_);
    return error_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::pair<std::string, std::string>> lines_;
  bool exited_ = false;
  int code_ = 0;
  std::string error_;
};

RankCommand Shell(const std::string& script) {
  RankCommand launch;
  launch.program = "/bin/sh";
  launch.args = {"-c", script};
  return launch;
}

// PR_SET_PDEATHSIG fires when the forking *thread* exits. The agent started
// standby ranks on a per-session thread, so a coordinator crash (which ends
// the session) killed them: this failed with exit code -9.
TEST(RankProcessTest, OutlivesTheThreadThatStartedIt) {
  Collector collector;
  std::unique_ptr<RankProcess> proc;
  std::thread starter([&] {
    absl::StatusOr<std::unique_ptr<RankProcess>> started = RankProcess::Start(
        Shell("echo started; sleep 2; echo alive"), collector.callbacks());
    ASSERT_TRUE(started.ok()) << started.status();
    proc = *std::move(started);
    // Past fork, prctl and exec before this thread goes.
    EXPECT_TRUE(collector.WaitForLine("started", seconds(30)));
  });
  starter.join();
  ASSERT_NE(proc, nullptr);
  ASSERT_TRUE(collector.WaitForExit(seconds(60)));
  EXPECT_EQ(collector.code(), 0)
      << "-9: killed when the thread that started it exited";
  EXPECT_THAT(collector.lines(),
              ::testing::Contains(std::make_pair(std::string("stdout"),
                                                 std::string("alive"))));
}

TEST(RankProcessTest, DiesWithTheAgentProcess) {
  // Orphans come to this process, so the rank's end can be waited for.
  ASSERT_EQ(prctl(PR_SET_CHILD_SUBREAPER, 1), 0);
  int report[2];
  ASSERT_EQ(pipe(report), 0);
  const pid_t agent = fork();
  ASSERT_GE(agent, 0);
  if (agent == 0) {  // a stand-in agent: starts a rank from a thread that ends
    close(report[0]);
    std::unique_ptr<RankProcess> proc;
    std::thread starter([&] {
      absl::StatusOr<std::unique_ptr<RankProcess>> started =
          RankProcess::Start(Shell("exec sleep 120"), {});
      if (started.ok()) proc = *std::move(started);
    });
    starter.join();
    if (proc == nullptr) _exit(2);
    const pid_t rank = proc->pid();
    if (write(report[1], &rank, sizeof(rank)) != sizeof(rank)) _exit(3);
    for (;;) pause();
  }
  close(report[1]);
  pid_t rank = -1;
  ASSERT_EQ(read(report[0], &rank, sizeof(rank)), static_cast<ssize_t>(sizeof(rank)));
  close(report[0]);
  kill(agent, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(agent, &status, 0), agent);
  // Normally the orphaned rank comes to this subreaper and is reaped here;
  // when it is not our child (ECHILD), it is enough that it is gone.
  const auto deadline = std::chrono::steady_clock::now() + seconds(30);
  bool reaped = false, gone = false;
  while (!reaped && !gone && std::chrono::steady_clock::now() < deadline) {
    const pid_t r = waitpid(rank, &status, WNOHANG);
    reaped = r == rank;
    gone = r < 0 && errno == ECHILD && kill(rank, 0) != 0 && errno == ESRCH;
    if (!reaped && !gone) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  if (!reaped && !gone) kill(rank, SIGKILL);
  prctl(PR_SET_CHILD_SUBREAPER, 0);
  ASSERT_TRUE(reaped || gone) << "the rank outlived the agent process";
  // Killed by the parent-death signal, or, when the agent died before the
  // child armed it, by the child's own check right after (exit 127).
  if (reaped) {
    EXPECT_TRUE((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) ||
                (WIFEXITED(status) && WEXITSTATUS(status) == 127))
        << "status " << status;
  }
}

// Security review H1: raw bytes in LogLine.text / RankStatus.message made
// the coordinator fail to parse the message, and the saved exit, replayed
// in every registration, locked the worker out for good.
TEST(RankProcessTest, InvalidUtf8OutputBecomesMessagesThatParse) {
  const std::string file = ::testing::TempDir() + "/rank-output.bin";
  {
    std::ofstream out(file, std::ios::binary);
    out << "x";  // puts the 16 KiB cut inside a 2-byte character
    for (int i = 0; i < 9000; ++i) out << "\xC3\xA9";
    out << "\n\xff\n";
  }
  Collector collector;
  absl::StatusOr<std::unique_ptr<RankProcess>> proc = RankProcess::Start(
      Shell("cat '" + file + "' >&2; exit 1"), collector.callbacks());
  ASSERT_TRUE(proc.ok()) << proc.status();
  ASSERT_TRUE(collector.WaitForExit(seconds(60)));
  EXPECT_EQ(collector.code(), 1);
  ASSERT_EQ(collector.lines().size(), 2u);
  for (const auto& [stream, line] : collector.lines()) {
    EXPECT_TRUE(IsValidUtf8(line));
    EXPECT_LE(line.size(), 16384u);
    v1::AgentMessage log;
    log.mutable_log()->mutable_line()->set_text(line);
    v1::AgentMessage parsed;
    EXPECT_TRUE(parsed.ParseFromString(log.SerializeAsString()));
  }
  EXPECT_TRUE(IsValidUtf8(collector.error()));
  // The exit as the agent reports it, and as it replays it when registering.
  v1::AgentMessage exit;
  exit.mutable_rank_status()->set_exit_code(collector.code());
  exit.mutable_rank_status()->set_message(collector.error());
  v1::AgentMessage hello;
  *hello.mutable_register_()->add_ranks() = exit.rank_status();
  v1::AgentMessage parsed;
  EXPECT_TRUE(parsed.ParseFromString(exit.SerializeAsString()));
  EXPECT_TRUE(parsed.ParseFromString(hello.SerializeAsString()));
}

TEST(RankProcessTest, TheAgentsJoinTokenIsNotInTheRanksEnvironment) {
  setenv("TRAINCTL_JOIN_TOKEN", "tcjoin_secret", 1);
  setenv("TRAINCTL_JOIN_TOKEN_FILE", "/etc/trainctl/join.token", 1);
  RankCommand launch = Shell(
      "echo token=${TRAINCTL_JOIN_TOKEN:-none} "
      "file=${TRAINCTL_JOIN_TOKEN_FILE:-none} path=${PATH:+set}");
  for (const char* name : {"TRAINCTL_JOIN_TOKEN", "TRAINCTL_JOIN_TOKEN_FILE",
                           "PATH"}) {
    if (IsAgentSecretVariable(name)) launch.env_remove.push_back(name);
  }
  Collector collector;
  absl::StatusOr<std::unique_ptr<RankProcess>> proc =
      RankProcess::Start(launch, collector.callbacks());
  ASSERT_TRUE(proc.ok()) << proc.status();
  ASSERT_TRUE(collector.WaitForExit(seconds(60)));
  unsetenv("TRAINCTL_JOIN_TOKEN");
  unsetenv("TRAINCTL_JOIN_TOKEN_FILE");
  EXPECT_THAT(collector.lines(),
              ::testing::ElementsAre(std::make_pair(
                  std::string("stdout"),
                  std::string("token=none file=none path=set"))));
}

// Exit code of a process that, as an unprivileged user, optionally hides
// itself and then lets its own child try to open /proc/<it>/environ:
// 0 opened, 10 EACCES, 77 cannot drop root here, others: setup failed.
int ChildOpensAgentEnviron(bool hide) {
  const pid_t agent = fork();
  if (agent < 0) return -1;
  if (agent == 0) {
    // Root may read anything: drop to nobody first, as a rank of an
    // unprivileged agent would be. (Changing uid clears the dumpable flag;
    // it is set back, as for an agent that never was root.)
    if (geteuid() == 0 && (setgroups(0, nullptr) != 0 || setgid(65534) != 0 ||
                           setuid(65534) != 0)) {
      _exit(77);
    }
    prctl(PR_SET_DUMPABLE, 1);
    if (hide && !HideFromSameUidProcesses().ok()) _exit(4);
    if (prctl(PR_GET_DUMPABLE) != (hide ? 0 : 1)) _exit(5);
    const pid_t self = getpid();
    const pid_t rank = fork();
    if (rank < 0) _exit(6);
    if (rank == 0) {
      char path[64];
      snprintf(path, sizeof(path), "/proc/%d/environ", static_cast<int>(self));
      const int fd = open(path, O_RDONLY);
      _exit(fd >= 0 ? 0 : errno == EACCES ? 10 : 11);
    }
    int status = 0;
    if (waitpid(rank, &status, 0) != rank || !WIFEXITED(status)) _exit(7);
    _exit(WEXITSTATUS(status));
  }
  int status = 0;
  if (waitpid(agent, &status, 0) != agent || !WIFEXITED(status)) return -2;
  return WEXITSTATUS(status);
}

// --rank-user: a rank runs as another user than a root agent, so a job's
// code cannot read the agent's key, state directory or join token.
TEST(RankProcessTest, RunsAsTheRankUser) {
  if (geteuid() != 0) GTEST_SKIP() << "switching users needs root";
  absl::StatusOr<RankCommand::User> nobody = LookUpUser("nobody");
  ASSERT_TRUE(nobody.ok()) << nobody.status();
  EXPECT_EQ(LookUpUser("no-such-user-here").status().code(),
            absl::StatusCode::kNotFound);
  const std::string secret = ::testing::TempDir() + "/agent-only.key";
  {
    std::ofstream(secret) << "private";
  }
  ASSERT_EQ(chmod(secret.c_str(), 0600), 0);
  RankCommand launch = Shell("id -u; cat '" + secret +
                            "' >/dev/null 2>&1 && echo read || echo denied");
  launch.run_as = *nobody;
  Collector collector;
  absl::StatusOr<std::unique_ptr<RankProcess>> proc =
      RankProcess::Start(launch, collector.callbacks());
  ASSERT_TRUE(proc.ok()) << proc.status();
  ASSERT_TRUE(collector.WaitForExit(seconds(60)));
  std::vector<std::string> out;
  for (const auto& [stream, line] : collector.lines()) out.push_back(line);
  ASSERT_GE(out.size(), 2u) << collector.error();
  EXPECT_EQ(out[0], std::to_string(nobody->uid));
  EXPECT_EQ(out[1], "denied");
}

TEST(AgentHardeningTest, ASameUidChildCannotReadTheAgentsEnvironment) {
  const int control = ChildOpensAgentEnviron(/*hide=*/false);
  if (control == 77) GTEST_SKIP() << "running as root without CAP_SETUID";
  ASSERT_EQ(control, 0) << "without hiding, a same-uid child reads environ";
  EXPECT_EQ(ChildOpensAgentEnviron(/*hide=*/true), 10);
  // And the agent's own flag, as main() sets it.
  ASSERT_EQ(prctl(PR_GET_DUMPABLE), 1);
  ASSERT_TRUE(HideFromSameUidProcesses().ok());
  EXPECT_EQ(prctl(PR_GET_DUMPABLE), 0);
  prctl(PR_SET_DUMPABLE, 1);
}

}  // namespace
}  // namespace trainctl::agent
