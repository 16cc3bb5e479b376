// The worker agent against a coordinator that crashes (issue #15): its ranks
// keep training through the outage, it is back within moments of the
// coordinator (over TLS), and two workers cannot share a state directory.

#include <dirent.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "local_cluster.h"

namespace trainctl::testing {
namespace {

using std::chrono::seconds;
using ::testing::HasSubstr;

constexpr char kData[] = "/usr/share/datasets/fashion-mnist/";

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + what.size())) {
    ++n;
  }
  return n;
}

// The parent pid and state letter of `pid` ('?' when it is gone).
std::pair<pid_t, char> ParentAndState(pid_t pid) {
  const std::string stat = Slurp("/proc/" + std::to_string(pid) + "/stat");
  const size_t close = stat.rfind(')');
  if (close == std::string::npos || close + 4 >= stat.size()) return {-1, '?'};
  std::istringstream rest(stat.substr(close + 2));
  char state = '?';
  pid_t parent = -1;
  rest >> state >> parent;
  return {parent, state};
}

// Live processes whose parent is one of `parents`.
std::vector<pid_t> ChildrenOf(const std::set<pid_t>& parents) {
  std::vector<pid_t> found;
  DIR* proc = opendir("/proc");
  while (dirent* entry = proc ? readdir(proc) : nullptr) {
    const pid_t pid = static_cast<pid_t>(atoi(entry->d_name));
    if (pid <= 0) continue;
    const auto [parent, state] = ParentAndState(pid);
    if (parents.count(parent) && state != 'Z') found.push_back(pid);
  }
  if (proc) closedir(proc);
  return found;
}

bool Alive(pid_t pid) {
  const char state = ParentAndState(pid).second;
  return state != '?' && state != 'Z';
}

// True once `path` holds `count` occurrences of `what` (bounded wait).
bool WaitForLog(const std::string& path, const std::string& what, int count,
                seconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (Count(Slurp(path), what) >= count) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

std::string Spec(const std::string& name, int epochs) {
  return "name: " + name + "\nranks: 2\nseed: 7\nmodel: mlp\ndata:\n"
         "  train_images: " + std::string(kData) + "train-images-idx3-ubyte.gz\n"
         "  train_labels: " + std::string(kData) + "train-labels-idx1-ubyte.gz\n"
         "  train_limit: 9600\n"
         "optimizer: {type: adamw, lr: 0.002}\n"
         "training: {epochs: " + std::to_string(epochs) +
         ", batch_size: 96, log_every_steps: 5}\n"
         "fault_tolerance: {max_restarts: 2}\n";
}

// On a TLS cluster, kill -9 of the coordinator made both ranks exit with -9
// (they were forked by a thread that ended with the stream), and the agents
// came back 33 s and 63 s after the coordinator (gRPC's reconnect backoff
// under the agent's own). The ranks now train through the outage, and the
// agents re-register well inside the bound below.
TEST(AgentReconnectTest, CoordinatorCrashKeepsRanksAndWorkersReturnPromptly) {
  LocalCluster cluster(2, 1, 1);  // TLS, workers joined with the join token
  // A first job, so that the second runs on standby ranks started after a
  // rank exited: those were forked on the session's heartbeat thread.
  v1::Job first = cluster.Submit(Spec("first", 1));
  ASSERT_EQ(cluster.WaitForJob(first.id(), [](const v1::Job& j) {
                      return j.state() == v1::JOB_STATE_SUCCEEDED ||
                             j.state() == v1::JOB_STATE_FAILED;
                    }, seconds(300)).state(),
            v1::JOB_STATE_SUCCEEDED);
  std::set<pid_t> workers;
  for (const char* name : {"--name w1 ", "--name w2 "}) {
    for (pid_t pid : FindProcesses({"trainctl-worker", name, cluster.dir()})) {
      workers.insert(pid);
    }
  }
  ASSERT_EQ(workers.size(), 2u);
  // The next job takes those standbys, not ranks started on assignment.
  const auto deadline = std::chrono::steady_clock::now() + seconds(60);
  while (ChildrenOf(workers).size() < 2 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const std::vector<pid_t> standbys = ChildrenOf(workers);
  ASSERT_EQ(standbys.size(), 2u);
  // Long enough (about 4000 steps) to still be training after the outage.
  v1::Job job = cluster.Submit(Spec("outage", 40));
  v1::Job mid = cluster.WaitForJob(
      job.id(), [](const v1::Job& j) { return j.latest_train().step() >= 10; },
      seconds(300));
  ASSERT_EQ(mid.state(), v1::JOB_STATE_RUNNING) << mid.reason();
  const std::vector<pid_t> ranks = ChildrenOf(workers);
  EXPECT_EQ(ranks, standbys);
  ASSERT_EQ(ranks.size(), 2u) << "one rank per 1-slot worker, no standby";

  cluster.KillCoordinator();
  // The ranks died within 50 ms of the crash; the job is far from its end.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  for (pid_t rank : ranks) {
    EXPECT_TRUE(Alive(rank)) << "rank " << rank << " died with the coordinator";
  }
  // The outage of the report: the coordinator is back 3 s after the crash.
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));
  ASSERT_TRUE(cluster.RestartCoordinator());
  for (const char* name : {"/w1.log", "/w2.log"}) {
    EXPECT_TRUE(WaitForLog(cluster.dir() + name, "registered with", 2,
                           seconds(15)))
        << name << " did not re-register within 15 s:\n"
        << Slurp(cluster.dir() + name);
    EXPECT_THAT(Slurp(cluster.dir() + name),
                ::testing::Not(HasSubstr("reconnecting in 5000 ms")));
  }
  // The same ranks finish the job: no restart.
  v1::Job done = cluster.WaitForJob(
      job.id(),
      [](const v1::Job& j) {
        return j.state() == v1::JOB_STATE_SUCCEEDED ||
               j.state() == v1::JOB_STATE_FAILED ||
               j.state() == v1::JOB_STATE_CANCELLED;
      },
      seconds(400));
  EXPECT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.reason();
  EXPECT_EQ(done.restarts(), 0);
  EXPECT_EQ(done.generation(), 1);
  for (const v1::RankInfo& rank : done.ranks()) {
    EXPECT_EQ(rank.exit_code(), 0) << "rank " << rank.rank();
  }
}

// Two workers on one state directory replaced each other's certificate; the
// second is now refused before it touches anything there.
TEST(AgentReconnectTest, ASecondWorkerOnTheSameStateDirIsRefused) {
  LocalCluster cluster(0, 1, 1);
  Process& first = cluster.StartWorker("a", 1, 1);
  ASSERT_TRUE(cluster.WaitForWorkers(1, seconds(60)));
  const std::string state_dir = cluster.dir() + "/a-state";
  const std::string log = cluster.dir() + "/second.log";
  Process second({std::string(TRAINCTL_BIN_DIR) + "/trainctl-worker",
                  "--coordinator", cluster.address(), "--name", "b",
                  "--state-dir", state_dir, "--ca-cert",
                  cluster.ca_cert_path(), "--join-token", cluster.join_token()},
                 log);
  EXPECT_EQ(second.Wait(seconds(60)), 1);
  const std::string output = Slurp(log);
  EXPECT_THAT(output, HasSubstr(state_dir));
  EXPECT_THAT(output, HasSubstr("pid " + std::to_string(first.pid())));
  EXPECT_TRUE(first.Running());
}

}  // namespace
}  // namespace trainctl::testing
