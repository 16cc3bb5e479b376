#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "worker/support/http_client.h"
#include "worker/support/mlflow_run.h"

namespace trainctl {

// Sends an MlflowRun's metrics from a thread of its own, so a slow or
// unreachable tracking server never holds up training. Keeps at most
// `max_queued` reports; beyond that the oldest are dropped, and counted.
// Failures go to `warn` (the first, then every 100th), and training goes on.
class MlflowSender {
 public:
  using Warn = std::function<void(const std::string&)>;
  MlflowSender(std::unique_ptr<HttpClient> http, std::unique_ptr<MlflowRun> run, Warn warn,
               size_t max_queued = 10'000);
  // Without Close: sends what is queued and ends the run FAILED.
  ~MlflowSender();

  void Log(int64_t step, int64_t time_unix_ms, std::map<std::string, double> values);
  // After the last Log: sends everything queued, stores `artifacts` (path
  // in the run -> bytes), and ends the run with `end_status` (FINISHED,
  // FAILED), or leaves it RUNNING when empty (a preempted job resumes
  // into it). The first error of these, if any.
  absl::Status Close(const std::string& end_status,
                     const std::vector<std::pair<std::string, std::string>>& artifacts,
                     int64_t end_unix_ms);


 private:
  struct Report {
    int64_t step;
    int64_t time_unix_ms;
    std::map<std::string, double> values;
  };
  void SendLoop();
  void Failed(const absl::Status& status);

  std::unique_ptr<HttpClient> http_;  // run_ uses it
  std::unique_ptr<MlflowRun> run_;
  const Warn warn_;
  const size_t max_queued_;
  std::mutex mu_;
  std::condition_variable changed_;
  std::deque<Report> queue_;
  bool stopping_ = false;
  bool closed_ = false;
  int64_t dropped_ = 0;
  int64_t failures_ = 0;
  absl::Status first_error_;
  std::thread thread_;  // last: starts after the members it reads
};

}  // namespace trainctl
