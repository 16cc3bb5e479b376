#pragma once

// The submitter and the watchers in a process of their own, so that what
// they measure is the coordinator and not the agents' gRPC client. The
// benchmark starts it as `bench_control_plane --users-process CONFIG` and
// drives it with one command per line on its stdin:
//   done JOB      every rank of JOB has exited: submit another
//   record 0|1    time SubmitJob calls and deliveries (1 clears old samples)
//   pause 0|1     hold new submissions
//   watch 0|1     open / close the watches
//   report        answers "key value" lines, then "end"
//   stop          exits

#include <sys/types.h>

#include <cstdio>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace trainctl::bench {

struct UsersConfig {
  std::string address, ca_pem_file;
  std::string submitter_token;
  std::vector<std::string> watcher_tokens;  // one per 50 watchers
  int jobs = 0, ranks_per_job = 0, watchers = 0;
};

// Written 0600: it holds tokens.
absl::Status WriteUsersConfig(const UsersConfig& config, const std::string& path);
// The child's main.
int RunUsersProcess(const std::string& config_path);

class UsersProcess {
 public:
  ~UsersProcess();
  absl::Status Start(const std::string& config_path);
  void Send(const std::string& line);  // any thread
  std::map<std::string, double> Report();
  void Stop();
  pid_t pid() const { return pid_; }

 private:
  std::mutex mu_;
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
};

}  // namespace trainctl::bench
