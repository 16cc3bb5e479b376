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

void EventHub::TrimLocked(JobLog& log) {
  if (!reader_) return;
  const int64_t last = log.first_seq + static_cast<int64_t>(log.events.size()) - 1;
  const bool finished = log.closed && log.published == last;
  while (!log.events.empty() && log.events.front().seq() <= log.published &&
         (finished || log.bytes > tail_bytes_)) {
    const size_t size = log.events.front().ByteSizeLong();
    log.bytes -= size;
    held_bytes_ -= size;
    log.events.pop_front();
    ++log.first_seq;
  }
}

int64_t EventHub::Append(const std::string& job_id, v1::JobEvent event) {
  std::lock_guard<std::mutex> lock(mu_);
  JobLog& log = LogLocked(job_id);
  const int64_t seq = log.first_seq + static_cast<int64_t>(log.events.size());
  event.set_seq(seq);
  event.set_job_id(job_id);
  const size_t size = event.ByteSizeLong();
  log.bytes += size;
  held_bytes_ += size;
  log.events.push_back(std::move(event));
  return seq;  // nobody is woken: watchers wait for Publish
}

void EventHub::Publish(const std::string& job_id, int64_t seq) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = logs_.find(job_id);
  if (it == logs_.end()) return;
  JobLog& log = *it->second;
  const int64_t last = log.first_seq + static_cast<int64_t>(log.events.size()) - 1;
  const int64_t visible = std::min<int64_t>(seq, last);
  if (visible <= log.published) return;
  bool state_changed = false;
  for (int64_t seq = std::max(log.published + 1, log.first_seq); seq <= visible; ++seq) {
    const v1::JobEvent& event = log.events[static_cast<size_t>(seq - log.first_seq)];
    if (!event.has_transition()) continue;
    state_changes_.push_back({++state_change_seq_, job_id, event.transition()});
    if (state_changes_.size() > kStateChangesKept) state_changes_.pop_front();
    state_changed = true;
  }
  log.published = visible;
  TrimLocked(log);
  log.changed.notify_all();
  if (state_changed) state_changed_.notify_all();
}

int64_t EventHub::StateChangeSeq() {
  std::lock_guard<std::mutex> lock(mu_);
  return state_change_seq_;
}

std::vector<EventHub::StateChange> EventHub::WaitForStateChanges(
    int64_t after_seq, int64_t timeout_ms, bool* missed) {
  std::unique_lock<std::mutex> lock(mu_);
  state_changed_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                          [&] { return state_change_seq_ > after_seq; });
  const int64_t oldest =
      state_changes_.empty() ? state_change_seq_ + 1 : state_changes_.front().feed_seq;
  *missed = after_seq + 1 < oldest && after_seq < state_change_seq_;
  // Seqs are consecutive in the deque: start at the first one wanted.
  const size_t first = static_cast<size_t>(std::max<int64_t>(0, after_seq + 1 - oldest));
  return std::vector<StateChange>(
      state_changes_.begin() + static_cast<std::ptrdiff_t>(std::min(first, state_changes_.size())),
      state_changes_.end());
}

absl::StatusOr<std::vector<v1::JobEvent>> EventHub::WaitForEvents(
    const std::string& job_id, int64_t from_seq, int64_t timeout_ms,
    bool* closed, size_t max_events) {
  if (from_seq < 1) from_seq = 1;
  std::unique_lock<std::mutex> lock(mu_);
  auto it = logs_.find(job_id);
  // Every job's log exists from its first event on; a missing one was
  // deleted (Forget), and reads as closed and empty.
  if (it == logs_.end()) {
    *closed = true;
    return std::vector<v1::JobEvent>{};
  }
  const std::shared_ptr<JobLog> log = it->second;
  auto complete = [&log] {
    return log->closed &&
           log->published ==
               log->first_seq + static_cast<int64_t>(log->events.size()) - 1;
  };
  log->changed.wait_for(lock, std::chrono::milliseconds(timeout_ms), [&] {
    return complete() || log->published >= from_seq;
  });
  const int64_t published = log->published;
  int64_t end = published;  // the last seq to return
  const int64_t available = end - (from_seq - 1);
  if (available > 0 && static_cast<uint64_t>(available) > max_events) {
    end = from_seq - 1 + static_cast<int64_t>(max_events);
  }
  std::vector<v1::JobEvent> out;
  if (end >= from_seq && from_seq < log->first_seq) {
    // Older than what is held: the store has every published event. Read
    // it without the lock, so publishers and other watchers go on.
    const bool was_complete = complete();
    lock.unlock();
    absl::StatusOr<std::vector<v1::JobEvent>> stored =
        reader_(job_id, from_seq, static_cast<size_t>(end - from_seq + 1));
    if (!stored.ok()) return stored.status();
    for (size_t i = 0; i < stored->size(); ++i) {
      if ((*stored)[i].seq() != from_seq + static_cast<int64_t>(i)) {
        return absl::DataLossError(absl::StrCat(
            "job ", job_id, ": the stored events from seq ", from_seq,
            " have a gap at #", i + 1));
      }
    }
    if (stored->empty()) {
      // Published events the store lacks: the job is being deleted (the
      // store forgets it just before the hub does). It ends like Forget.
      *closed = true;
      return stored;
    }
    *closed = was_complete &&
              from_seq + static_cast<int64_t>(stored->size()) - 1 == published;
    return stored;
  }
  for (int64_t seq = from_seq; seq <= end; ++seq) {
    out.push_back(log->events[static_cast<size_t>(seq - log->first_seq)]);
  }
  *closed = complete() && end == published;
  return out;
}

int64_t EventHub::PublishedSeq(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = logs_.find(job_id);
  return it == logs_.end() ? 0 : it->second->published;
}

absl::Status EventHub::Restore(const std::string& job_id, int64_t last_seq,
                               std::vector<v1::JobEvent> tail, bool closed) {
  const int64_t first_seq = last_seq - static_cast<int64_t>(tail.size()) + 1;
  if (first_seq < 1 || (!reader_ && first_seq != 1)) {
    return absl::DataLossError(absl::StrCat(
        "job ", job_id, ": ", tail.size(), " stored events restored for a "
        "history of ", last_seq));
  }
  size_t bytes = 0;
  for (size_t i = 0; i < tail.size(); ++i) {
    if (tail[i].seq() != first_seq + static_cast<int64_t>(i)) {
      return absl::DataLossError(absl::StrCat(
          "job ", job_id, ": stored event #", first_seq + i, " has seq ",
          tail[i].seq(), "; the event history has a gap"));
    }
    bytes += tail[i].ByteSizeLong();
  }
  std::lock_guard<std::mutex> lock(mu_);
  JobLog& log = LogLocked(job_id);
  held_bytes_ -= log.bytes;
  log.events.assign(std::make_move_iterator(tail.begin()),
                    std::make_move_iterator(tail.end()));
  log.first_seq = first_seq;
  log.published = last_seq;
  log.bytes = bytes;
  held_bytes_ += bytes;
  log.closed = closed;
  TrimLocked(log);
  log.changed.notify_all();
  return absl::OkStatus();
}

size_t EventHub::HeldBytes() {
  std::lock_guard<std::mutex> lock(mu_);
  return held_bytes_;
}

size_t EventHub::tail_bytes() const {
  return reader_ ? tail_bytes_ : std::numeric_limits<size_t>::max();
}

void EventHub::Close(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  JobLog& log = LogLocked(job_id);
  log.closed = true;
  TrimLocked(log);
  log.changed.notify_all();
}

void EventHub::Forget(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = logs_.find(job_id);
  if (it == logs_.end()) return;
  // Its watchers still hold the log: empty and closed, it ends them as a
  // missing one would.
  JobLog& log = *it->second;
  held_bytes_ -= log.bytes;
  log.bytes = 0;
  log.events.clear();
  log.first_seq = 1;
  log.published = 0;
  log.closed = true;
  log.changed.notify_all();
  logs_.erase(it);
}

void EventHub::WakeAll() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [id, log] : logs_) log->changed.notify_all();
  state_changed_.notify_all();
}

}  // namespace trainctl::coordinator
