#pragma once

// The people in front of the simulated cluster: a submitter that keeps a
// number of jobs in the cluster (submitting a new one whenever one ends)
// and watchers that follow running jobs as `trainctl watch` / `logs -f`
// do, measuring how long each rank report took to reach them. They run in
// a process of their own (users_process.h): in the agents' process, whose
// gRPC client serves 1,000 connections, a SubmitJob took 40 ms at p50
// before it left the process, while the CLI's took 21 ms whole.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "bench/control_plane/latency_recorder.h"
#include "trainctl/v1/jobs.grpc.pb.h"

namespace trainctl::bench {

class JobSubmitter {
 public:
  // Keeps `target` jobs of `ranks` ranks each submitted and not ended.
  JobSubmitter(std::shared_ptr<grpc::Channel> channel, int target, int ranks);
  ~JobSubmitter();

  void Start();
  void Stop();
  // Holds new submissions (a restart is being measured) or lets them go.
  void Pause(bool paused);
  // Every rank of `job_id` has exited (told by the agents' process).
  void JobDone(const std::string& job_id);

  // A job to watch, round robin over the ones not ended; "" when none.
  std::string PickJob();
  int active() const;
  int64_t submitted() const { return submitted_.load(); }
  int64_t refused() const { return refused_.load(); }
  // SubmitJob latencies are recorded while true.
  void Record(bool on) { recording_ = on; }
  LatencyRecorder& latency() { return latency_; }

 private:
  void Run();

  const std::unique_ptr<v1::Jobs::Stub> stub_;
  const int target_;
  const std::string spec_;
  mutable std::mutex mu_;
  std::condition_variable changed_;
  std::vector<std::string> active_;   // GUARDED_BY(mu_): submitted, not ended
  size_t next_pick_ = 0;              // GUARDED_BY(mu_)
  bool paused_ = false, stopping_ = false;  // GUARDED_BY(mu_)
  std::atomic<int64_t> submitted_{0}, refused_{0};
  std::atomic<bool> recording_{true};
  LatencyRecorder latency_;
  std::thread thread_;
};

class Watchers {
 public:
  // One watcher per channel; each follows a job from PickJob until it ends,
  // then another one.
  Watchers(std::vector<std::shared_ptr<grpc::Channel>> channels,
           JobSubmitter* jobs);
  ~Watchers();
  void Start();
  void Stop();
  // Delivery latencies are recorded while true.
  void Record(bool on) { recording_ = on; }
  LatencyRecorder& delivery() { return delivery_; }
  int64_t events() const { return events_.load(); }
  int64_t failed_watches() const { return failed_.load(); }

 private:
  void Run(int index);

  const std::vector<std::shared_ptr<grpc::Channel>> channels_;
  JobSubmitter* const jobs_;
  std::atomic<bool> stopping_{false}, recording_{false};
  std::atomic<int64_t> events_{0}, failed_{0};
  std::mutex mu_;
  std::set<grpc::ClientContext*> open_;  // GUARDED_BY(mu_): to cancel at Stop
  LatencyRecorder delivery_;
  std::vector<std::thread> threads_;
};

}  // namespace trainctl::bench
