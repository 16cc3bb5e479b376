#include "coordinator/event_hub.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"

namespace trainctl::coordinator {

EventHub::JobLog& EventHub::LogLocked(const std::string& job_id) {
  std::shared_ptr<JobLog>& log = logs_[job_id];
  if (log == nullptr) log = std::make_shared<JobLog>();
  return *log;
}

int64_t EventHub::Append(const std::string& job_id, v1::JobEvent event) {
  std::lock_guard<std::mutex> lock(mu_);
  JobLog& log = LogLocked(job_id);
  const int64_t seq = static_cast<int64_t>(log.events.size()) + 1;
  event.set_seq(seq);
  event.set_job_id(job_id);
  log.events.push_back(std::move(event));
  return seq;  // nobody is woken: watchers wait for Publish
}

void EventHub::Publish(const std::string& job_id, int64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = logs_.find(job_id);
  if (it == logs_.end()) return;
  JobLog& log = *it->second;
  const int64_t visible =
      std::min<int64_t>(seq, static_cast<int64_t>(log.events.size()));
  if (visible <= log.published) return;
  log.published = visible;
  log.changed.notify_all();
}

std::vector<v1::JobEvent> EventHub::WaitForEvents(const std::string& job_id,
                                                  int64_t from_seq,
                                                  int64_t timeout_ms,
                                                  bool* closed,
                                                  size_t max_events) {
  if (from_seq < 1) from_seq = 1;
  std::unique_lock<std::mutex> lock(mu_);
  auto it = logs_.find(job_id);
  // Every job's log exists from its first event on; a missing one was
  // deleted (Forget), and reads as closed and empty.
  if (it == logs_.end()) {
    *closed = true;
    return {};
  }
  const std::shared_ptr<JobLog> log = it->second;
  auto complete = [&log] {
    return log->closed &&
           log->published == static_cast<int64_t>(log->events.size());
  };
  log->changed.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] {
    return complete() || log->published >= from_seq;
  });
  std::vector<v1::JobEvent> out;
  int64_t end = log->published;
  const int64_t available = end - (from_seq - 1);
  if (available > 0 && max_events < static_cast<size_t>(available)) {
    end = from_seq - 1 + static_cast<int64_t>(max_events);
  }
  for (int64_t i = from_seq - 1; i < end; ++i) out.push_back(log->events[i]);
  *closed = complete() && end == log->published;
  return out;
}

int64_t EventHub::PublishedSeq(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = logs_.find(job_id);
  return it == logs_.end() ? 0 : it->second->published;
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
  std::lock_guard<std::mutex> lock(mu_);
  JobLog& log = LogLocked(job_id);
  log.events = std::move(events);
  log.published = static_cast<int64_t>(log.events.size());
  log.closed = closed;
  log.changed.notify_all();
  return absl::OkStatus();
}

void EventHub::Close(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  JobLog& log = LogLocked(job_id);
  log.closed = true;
  log.changed.notify_all();
}

void EventHub::Forget(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = logs_.find(job_id);
  if (it == logs_.end()) return;
  // Its watchers still hold the log: empty and closed, it ends them as a
  // missing one would.
  JobLog& log = *it->second;
  log.events.clear();
  log.published = 0;
  log.closed = true;
  log.changed.notify_all();
  logs_.erase(it);
}

void EventHub::WakeAll() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, log] : logs_) log->changed.notify_all();
}

}  // namespace trainctl::coordinator
