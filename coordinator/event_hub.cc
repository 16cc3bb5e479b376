#include "coordinator/event_hub.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"

namespace trainctl::coordinator {

int64_t EventHub::Append(const std::string& job_id, v1::JobEvent event) {
  std::lock_guard<std::mutex> lock(mu_);
  JobLog& log = logs_[job_id];
  const int64_t seq = static_cast<int64_t>(log.events.size()) + 1;
  event.set_seq(seq);
  event.set_job_id(job_id);
  log.events.push_back(std::move(event));
  return seq;  // nobody is woken: watchers wait for Publish
}

void EventHub::Publish(const std::string& job_id, int64_t seq) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = logs_.find(job_id);
    if (it == logs_.end()) return;
    JobLog& log = it->second;
    const int64_t visible =
        std::min<int64_t>(seq, static_cast<int64_t>(log.events.size()));
    if (visible <= log.published) return;
    log.published = visible;
  }
  appended_.notify_all();
}

std::vector<v1::JobEvent> EventHub::WaitForEvents(const std::string& job_id,
                                                  int64_t from_seq,
                                                  int64_t timeout_ms,
                                                  bool* closed) {
  if (from_seq < 1) from_seq = 1;
  std::unique_lock<std::mutex> lock(mu_);
  auto complete = [](const JobLog& log) {
    return log.closed &&
           log.published == static_cast<int64_t>(log.events.size());
  };
  // Every job's log exists from its first event on; a missing one was
  // deleted (Forget), and reads as closed and empty.
  static const JobLog kForgotten{{}, 0, true};
  auto log_of = [&]() -> const JobLog& {
    auto it = logs_.find(job_id);
    return it == logs_.end() ? kForgotten : it->second;
  };
  auto ready = [&] {
    const JobLog& log = log_of();
    return complete(log) || log.published >= from_seq;
  };
  appended_.wait_for(lock, std::chrono::milliseconds(timeout_ms), ready);
  const JobLog& log = log_of();
  std::vector<v1::JobEvent> out;
  for (int64_t i = from_seq - 1; i < log.published; ++i) {
    out.push_back(log.events[i]);
  }
  *closed = complete(log);
  return out;
}

absl::Status EventHub::Restore(const std::string& job_id,
                              std::vector<v1::JobEvent> events, bool closed) {
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i].seq() != static_cast<int64_t>(i) + 1) {
      return absl::DataLossError(absl::StrCat(
          "job ", job_id, ": stored event #", i + 1, " has seq ",
          events[i].seq(), "; the event history has a gap"));
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    JobLog& log = logs_[job_id];
    log.events = std::move(events);
    log.published = static_cast<int64_t>(log.events.size());
    log.closed = closed;
  }
  appended_.notify_all();
  return absl::OkStatus();
}

void EventHub::Close(const std::string& job_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    logs_[job_id].closed = true;
  }
  appended_.notify_all();
}

void EventHub::Forget(const std::string& job_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    logs_.erase(job_id);  // WaitForEvents reads a missing log as closed
  }
  appended_.notify_all();
}

void EventHub::WakeAll() { appended_.notify_all(); }

}  // namespace trainctl::coordinator
