// The agent's side of a dry run's data check: the coordinator asks a worker
// to count a spec's samples where the data lives (security review H2); the
// checks run one at a time on a thread of the agent's own, never on the
// thread that reads the coordinator's stream.

#include "worker/agent/agent.h"
#include "worker/agent/data_probe_handler.h"

namespace trainctl::agent {

void Agent::QueueDataProbe(const v1::ProbeDataRequest& request) {
  {
    std::lock_guard<std::mutex> lock(probe_mu_);
    // The coordinator waits a few seconds for each: more queued than this
    // would be answered after it gave up.
    if (probes_.size() >= 4) {
      v1::AgentMessage busy;
      busy.mutable_probe_data_result()->set_request_id(request.request_id());
      busy.mutable_probe_data_result()->set_error(
          "the worker is busy with other data checks");
      Send(std::move(busy));
      return;
    }
    probes_.push_back(request);
    if (!probe_thread_.joinable()) {
      probe_thread_ = std::thread([this] { ProbeLoop(); });
    }
  }
  probe_cv_.notify_all();
}

void Agent::ProbeLoop() {
  std::unique_lock<std::mutex> lock(probe_mu_);
  while (true) {
    probe_cv_.wait(lock, [this] { return stopping_.load() || !probes_.empty(); });
    if (stopping_.load()) return;
    v1::ProbeDataRequest request = std::move(probes_.front());
    probes_.pop_front();
    lock.unlock();
    v1::AgentMessage answer;
    *answer.mutable_probe_data_result() = HandleProbeData(request);
    Send(std::move(answer));
    lock.lock();
  }
}

}  // namespace trainctl::agent
