#pragma once

// The coordinator under test as a child process of the benchmark: started
// on loopback, killed with SIGKILL and restarted on the same port, and
// read from /proc for its CPU time, memory and threads.

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"

namespace trainctl::bench {

struct ProcessSample {
  double cpu_seconds = 0;  // user + system, since the process started
  int64_t rss_kib = 0;     // VmRSS
  int64_t peak_rss_kib = 0;  // VmHWM
  int threads = 0;
};

// /proc/PID/stat and /proc/PID/status of a live process (all zero once gone).
ProcessSample SampleProcess(pid_t pid);
// The same for this process.
ProcessSample SampleSelf();

class CoordinatorProcess {
 public:
  CoordinatorProcess(std::string binary, std::string state_dir,
                     std::vector<std::string> extra_flags);
  ~CoordinatorProcess();

  // Runs `trainctl-coordinator init` (CA, tokens) and then `add-user NAME
  // --admin` for each name; returns their tokens in order.
  absl::Status Init(const std::vector<std::string>& admin_users,
                    std::vector<std::string>* tokens);
  // Starts it on 127.0.0.1:`port` (0: any free port, read back from its
  // port file) and waits up to 30 s for it to listen.
  absl::Status Start(int port = 0);
  void Kill();  // SIGKILL and reap
  void Stop();  // SIGTERM and reap

  pid_t pid() const { return pid_; }
  int port() const { return port_; }
  std::string address() const;
  std::string ReadStateFile(const std::string& relative) const;

 private:
  const std::string binary_, state_dir_;
  const std::vector<std::string> extra_flags_;
  pid_t pid_ = -1;
  int port_ = 0;
  int starts_ = 0;
};

}  // namespace trainctl::bench
