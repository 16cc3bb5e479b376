#include "worker/agent/rank_process.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/atomic_file.h"
#include "common/frame_io.h"
#include "common/utf8_sanitize.h"

extern char** environ;

namespace trainctl::agent {
namespace {

constexpr size_t kMaxLineBytes = 16 * 1024;

struct Pipe {
  int read = -1;
  int write = -1;
};

absl::Status MakePipe(Pipe* p) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("pipe: ", strerror(errno)));
  }
  p->read = fds[0];
  p->write = fds[1];
  return absl::OkStatus();
}

// Forks on one thread that lives as long as the process. PR_SET_PDEATHSIG
// fires when the *thread* that forked the child exits, not the process: a
// rank forked on a per-session thread (the heartbeat thread starts standby
// ranks) was SIGKILLed whenever that session ended, e.g. when the
// coordinator crashed. This thread never exits, so the signal means exactly
// "the agent process died". A lifeline pipe would need the rank's
// cooperation; this keeps the guarantee in the kernel and in this file.
class Launcher {
 public:
  // The launcher of this process; a forked child (tests fork "agents") gets
  // its own, since the parent's thread does not exist in it.
  static Launcher& OfThisProcess() {
    static std::mutex mu;
    static Launcher* launcher = nullptr;
    static pid_t owner = -1;
    std::lock_guard<std::mutex> lock(mu);
    if (launcher == nullptr || owner != getpid()) {
      launcher = new Launcher();  // never destroyed: its thread must outlive
      owner = getpid();           // every rank
    }
    return *launcher;
  }

  // Runs `fork_child` on the launcher thread and returns what it returned.
  pid_t Run(const std::function<pid_t()>& fork_child) {
    Job job{&fork_child};
    std::unique_lock<std::mutex> lock(mu_);
    queue_.push_back(&job);
    cv_.notify_all();
    cv_.wait(lock, [&job] { return job.done; });
    return job.pid;
  }

 private:
  struct Job {
    const std::function<pid_t()>* fork_child;
    pid_t pid = -1;
    bool done = false;
  };

  Launcher() { std::thread([this] { Loop(); }).detach(); }

  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      cv_.wait(lock, [this] { return !queue_.empty(); });
      Job* job = queue_.front();
      queue_.pop_front();
      lock.unlock();
      const pid_t pid = (*job->fork_child)();
      lock.lock();
      job->pid = pid;
      job->done = true;
      cv_.notify_all();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job*> queue_;
};

void WriteAllAndClose(int fd, const std::string& bytes) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  close(fd);
}

}  // namespace

absl::StatusOr<RankCommand::User> LookUpUser(const std::string& name) {
  std::vector<char> buffer(16384);
  passwd entry;
  passwd* found = nullptr;
  getpwnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found);
  if (found == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("--rank-user: no user named '", name, "'"));
  }
  RankCommand::User user;
  user.uid = found->pw_uid;
  user.gid = found->pw_gid;
  int count = 64;
  user.groups.resize(count);
  if (getgrouplist(name.c_str(), user.gid, user.groups.data(), &count) < 0) {
    user.groups.resize(count);
    getgrouplist(name.c_str(), user.gid, user.groups.data(), &count);
  }
  user.groups.resize(count);
  return user;
}

absl::Status GiveDataCacheToRankUser(const std::string& state_dir,
                                     const std::string& cache_dir,
                                     const RankCommand::User& user) {
  auto failed = [](const std::string& what, const std::string& dir) {
    return absl::UnavailableError(absl::StrCat(
        "--rank-user: ", what, " ", dir, ": ", strerror(errno)));
  };
  const size_t slash = cache_dir.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    if (absl::Status made = MakeDirs(cache_dir.substr(0, slash)); !made.ok()) {
      return absl::UnavailableError(
          absl::StrCat("--rank-user: ", made.message()));
    }
  }
  if (mkdir(cache_dir.c_str(), 0700) != 0 && errno != EEXIST) {
    return failed("cannot create", cache_dir);
  }
  struct stat st;
  if (lstat(cache_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    errno = ENOTDIR;
    return failed("cannot use", cache_dir);
  }
  if (chown(cache_dir.c_str(), user.uid, user.gid) != 0) {
    return failed("cannot hand to the rank user", cache_dir);
  }
  if (absl::StartsWith(cache_dir, state_dir + "/") &&
      chmod(state_dir.c_str(), 0711) != 0) {
    return failed("cannot open to the rank user (0711)", state_dir);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<RankProcess>> RankProcess::Start(
    const RankCommand& launch, Callbacks callbacks) {
  Pipe in, out, err, report;
  for (Pipe* p : {&in, &out, &err, &report}) {
    absl::Status s = MakePipe(p);
    if (!s.ok()) return s;
  }
  // Everything the child needs is built before fork: after it, only
  // async-signal-safe calls are allowed.
  std::vector<std::string> arg_storage{launch.program};
  arg_storage.insert(arg_storage.end(), launch.args.begin(), launch.args.end());
  std::vector<char*> argv;
  for (auto& a : arg_storage) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_storage;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string entry(*e);
    std::string key = entry.substr(0, entry.find('='));
    const bool removed = std::find(launch.env_remove.begin(),
                                   launch.env_remove.end(),
                                   key) != launch.env_remove.end();
    if (!launch.env.count(key) && !removed) env_storage.push_back(entry);
  }
  for (const auto& [k, v] : launch.env) env_storage.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t parent = getpid();

  int fork_errno = 0;
  const pid_t pid = Launcher::OfThisProcess().Run([&]() -> pid_t {
    const pid_t child = fork();
    if (child != 0) {
      fork_errno = errno;
      return child;
    }
    setpgid(0, 0);
    if (launch.run_as) {
      // Before PR_SET_PDEATHSIG: changing credentials clears it.
      const RankCommand::User& user = *launch.run_as;
      if (setgroups(user.groups.size(), user.groups.data()) != 0 ||
          setgid(user.gid) != 0 || setuid(user.uid) != 0) {
        const char msg[] = "trainctl-worker: cannot switch to --rank-user\n";
        (void)!write(2, msg, sizeof(msg) - 1);
        _exit(126);
      }
    }
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(127);  // the agent died before prctl
    dup2(in.read, 0);
    dup2(out.write, 1);
    dup2(err.write, 2);
    dup2(report.write, 3);
    // Pipe fds are close-on-exec; fds 0-3 are the dup2'd copies and stay.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    execve(argv[0], argv.data(), envp.data());
    const char msg[] = "trainctl-worker: exec of the rank process failed\n";
    (void)!write(2, msg, sizeof(msg) - 1);
    _exit(127);
  });
  if (pid < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("fork: ", strerror(fork_errno)));
  }
  setpgid(pid, pid);  // also from the parent, so Terminate never races it
  close(in.read);
  close(out.write);
  close(err.write);
  close(report.write);

  std::unique_ptr<RankProcess> proc(new RankProcess(pid, std::move(callbacks)));
  if (launch.standby) {
    proc->standby_stdin_ = in.write;
  } else {
    // Feed the input on a thread: a large spec must not block the agent.
    std::string input = launch.stdin_bytes;
    const int in_fd = in.write;
    proc->readers_.emplace_back([in_fd, input = std::move(input)] {
      WriteAllAndClose(in_fd, input);
    });
  }
  RankProcess* self = proc.get();
  const int out_fd = out.read, err_fd = err.read, report_fd = report.read;
  proc->readers_.emplace_back([self, out_fd] { self->ReadLines(out_fd, "stdout"); });
  proc->readers_.emplace_back([self, err_fd] { self->ReadLines(err_fd, "stderr"); });
  proc->readers_.emplace_back([self, report_fd] { self->ReadFrames(report_fd); });
  proc->waiter_ = std::thread([self] { self->WaitForExit(); });
  return proc;
}

absl::Status RankProcess::Activate(const std::string& stdin_bytes,
                                  Callbacks callbacks) {
  int fd = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (standby_stdin_ < 0 || exited_.load()) {
      return absl::FailedPreconditionError("not a waiting standby rank");
    }
    cb_ = std::move(callbacks);
    fd = standby_stdin_;
    standby_stdin_ = -1;
  }
  // The assignment is small (a spec and flags): the pipe buffer takes it.
  WriteAllAndClose(fd, stdin_bytes);
  return absl::OkStatus();
}

bool RankProcess::Rebind(Callbacks callbacks) {
  std::lock_guard<std::mutex> lock(mu_);
  if (exit_taken_) return false;
  cb_ = std::move(callbacks);
  return true;
}

RankProcess::Callbacks RankProcess::callbacks() {
  std::lock_guard<std::mutex> lock(mu_);
  return cb_;
}

RankProcess::~RankProcess() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (standby_stdin_ >= 0) close(standby_stdin_);  // lets a standby exit
    standby_stdin_ = -1;
  }
  if (!exited_.load()) kill(-pid_, SIGKILL);
  if (waiter_.joinable()) waiter_.join();
  if (killer_.joinable()) killer_.join();
}

void RankProcess::Terminate(int64_t grace_ms) {
  if (exited_.load()) return;
  std::lock_guard<std::mutex> lock(stop_mu_);
  if (reaped_) return;
  const auto now = std::chrono::steady_clock::now();
  const Deadline kill_at = now + std::chrono::milliseconds(grace_ms);
  if (!term_sent_) {
    kill(-pid_, SIGTERM);
    term_sent_ = true;
  }
  term_at_ = now;
  kill_at_ = stopping_ ? std::min(kill_at_, kill_at) : kill_at;
  if (!stopping_) {
    stopping_ = true;
    killer_ = std::thread([this] { Escalate(); });
  }
  stop_cv_.notify_all();
}

void RankProcess::CheckpointAndStop(int64_t grace_ms, int64_t kill_grace_ms) {
  if (exited_.load()) return;
  std::lock_guard<std::mutex> lock(stop_mu_);
  if (stopping_ || reaped_) return;  // already asked, being ended, or gone
  kill(pid_, SIGUSR1);
  stopping_ = true;
  term_at_ = std::chrono::steady_clock::now() + std::chrono::milliseconds(grace_ms);
  kill_at_ = term_at_ + std::chrono::milliseconds(kill_grace_ms);
  killer_ = std::thread([this] { Escalate(); });
}

void RankProcess::RequestRegroup(int generation) { QueueRegroupSignal(generation); }

void RankProcess::AbandonGroup(int generation) { QueueRegroupSignal(-generation); }

void RankProcess::QueueRegroupSignal(int value) {
  std::lock_guard<std::mutex> lock(stop_mu_);
  if (exited_.load() || reaped_) return;  // the pid may be another's by now
  sigval queued{};
  queued.sival_int = value;
  sigqueue(pid_, SIGUSR2, queued);
}

void RankProcess::Escalate() {
  std::unique_lock<std::mutex> lock(stop_mu_);
  while (!reaped_) {
    const auto now = std::chrono::steady_clock::now();
    if (!term_sent_ && now >= term_at_) {
      kill(-pid_, SIGTERM);
      term_sent_ = true;
    }
    if (now >= kill_at_) {
      kill(-pid_, SIGKILL);
      return;
    }
    // Woken early when a Terminate moves the deadlines.
    stop_cv_.wait_for(lock, std::chrono::milliseconds(20));
  }
}

void RankProcess::ReadLines(int fd, const std::string& stream) {
  FILE* f = fdopen(fd, "r");
  if (f == nullptr) {
    close(fd);
    return;
  }
  char* buf = nullptr;
  size_t cap = 0;
  ssize_t n;
  while ((n = getline(&buf, &cap, f)) > 0) {
    std::string line(buf, static_cast<size_t>(n));
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) {
      line.pop_back();
    }
    // Lines go into proto string fields: valid UTF-8, cut between code
    // points, or the coordinator cannot parse the message carrying them.
    line = SanitizeUtf8(line, kMaxLineBytes);
    if (stream == "stderr" && !line.empty()) {
      std::lock_guard<std::mutex> lock(mu_);
      last_error_ = line;
    }
    Callbacks cb = callbacks();
    if (cb.on_line) cb.on_line(stream, line);
  }
  free(buf);
  fclose(f);
}

void RankProcess::ReadFrames(int fd) {
  v1::RankReport report;
  while (ReadFrame(fd, &report).ok()) {
    Callbacks cb = callbacks();
    if (cb.on_report) cb.on_report(report);
    report.Clear();
  }
  close(fd);
}

void RankProcess::WaitForExit() {
  int status = 0;
  while (waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  {
    // From now on the pid may belong to another process: no more signals.
    std::lock_guard<std::mutex> lock(stop_mu_);
    reaped_ = true;
  }
  // Readers finish when every holder of the pipes (the rank and anything it
  // spawned) is gone; kill stragglers of the group so that happens.
  kill(-pid_, SIGKILL);
  for (auto& t : readers_) t.join();
  exited_.store(true);
  const int code = WIFEXITED(status)     ? WEXITSTATUS(status)
                   : WIFSIGNALED(status) ? -WTERMSIG(status)
                                         : -1;
  std::string last_error;
  Callbacks cb;
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_error = last_error_;
    exit_taken_ = true;  // a later Rebind is too late for the exit
    cb = cb_;
  }
  if (cb.on_exit) cb.on_exit(code, last_error);
}

}  // namespace trainctl::agent
