#include "coordinator/job_store.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"

namespace trainctl::coordinator {

absl::Status JobStore::PutJob(const v1::Job& job) {
  JobWrite write;
  write.jobs.push_back(job);
  return Write(write, Durability::kImmediate);
}

absl::Status JobStore::AppendEvent(const std::string& job_id,
                                   v1::JobEvent event) {
  event.set_job_id(job_id);
  JobWrite write;
  write.events.push_back(std::move(event));
  return Write(write, Durability::kImmediate);
}

absl::Status ValidateJobWrite(const JobWrite& write) {
  for (const v1::Job& job : write.jobs) {
    if (job.id().empty()) {
      return absl::InvalidArgumentError("cannot store a job without an id");
    }
  }
  for (const v1::JobEvent& event : write.events) {
    if (event.job_id().empty() || event.seq() < 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot store event seq ", event.seq(), " of job '",
                       event.job_id(), "': needs a job id and seq >= 1"));
    }
  }
  return absl::OkStatus();
}

absl::Status InMemoryJobStore::Write(const JobWrite& write, Durability) {
  if (absl::Status valid = ValidateJobWrite(write); !valid.ok()) return valid;
  std::lock_guard<std::mutex> lock(mu_);
  // Check everything first so the write is all or nothing.
  for (const v1::JobEvent& event : write.events) {
    const bool in_write =
        std::any_of(write.jobs.begin(), write.jobs.end(),
                    [&](const v1::Job& j) { return j.id() == event.job_id(); });
    if (!in_write && jobs_.count(event.job_id()) == 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot store an event of unknown job '", event.job_id(), "'"));
    }
  }
  for (const v1::Job& job : write.jobs) {
    if (jobs_.count(job.id()) == 0) order_.push_back(job.id());
    jobs_[job.id()] = job;
  }
  for (const v1::JobEvent& event : write.events) {
    events_[event.job_id()].emplace(event.seq(), event);  // first one wins
  }
  next_job_number_ = std::max(next_job_number_, write.next_job_number);
  return absl::OkStatus();
}

void EventScanner::Add(v1::JobEvent event) {
  if (scan_.visit) scan_.visit(job_.job, event);
  job_.last_seq = event.seq();
  bytes_ += event.ByteSizeLong();
  tail_.push_back(std::move(event));
  while (!tail_.empty() && bytes_ > scan_.keep_bytes) {
    bytes_ -= tail_.front().ByteSizeLong();
    tail_.pop_front();
  }
}

void EventScanner::Finish() {
  job_.events.assign(std::make_move_iterator(tail_.begin()),
                     std::make_move_iterator(tail_.end()));
  tail_.clear();
  bytes_ = 0;
}

absl::StatusOr<StoredState> InMemoryJobStore::Load(const EventScan& scan) {
  std::lock_guard<std::mutex> lock(mu_);
  StoredState state;
  state.next_job_number = next_job_number_;
  for (const std::string& id : order_) {
    StoredJob stored;
    stored.job = jobs_.at(id);
    EventScanner scanner(scan, stored);
    auto it = events_.find(id);
    if (it != events_.end()) {
      for (const auto& [seq, event] : it->second) scanner.Add(event);
    }
    scanner.Finish();
    state.jobs.push_back(std::move(stored));
  }
  return state;
}

absl::StatusOr<std::vector<v1::JobEvent>> InMemoryJobStore::ReadEvents(
    const std::string& job_id, int64_t from_seq, size_t max_events) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::JobEvent> out;
  auto it = events_.find(job_id);
  if (it == events_.end()) return out;
  for (auto e = it->second.lower_bound(from_seq);
       e != it->second.end() && out.size() < max_events; ++e) {
    out.push_back(e->second);
  }
  return out;
}

absl::Status InMemoryJobStore::PutCheckpoint(
    const CheckpointRecord& checkpoint) {
  std::lock_guard<std::mutex> lock(mu_);
  if (jobs_.count(checkpoint.job_id) == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot catalog a checkpoint of unknown job '",
                     checkpoint.job_id, "'"));
  }
  checkpoints_[{checkpoint.job_id, checkpoint.step}] = checkpoint;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<CheckpointRecord>> InMemoryJobStore::ListCheckpoints(
    const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<CheckpointRecord> out;
  for (auto it = checkpoints_.lower_bound(
           {job_id, std::numeric_limits<int64_t>::min()});
       it != checkpoints_.end() && it->first.first == job_id; ++it) {
    out.push_back(it->second);
  }
  return out;
}

absl::Status InMemoryJobStore::DeleteCheckpoint(const std::string& job_id,
                                                int64_t step) {
  std::lock_guard<std::mutex> lock(mu_);
  if (checkpoints_.erase({job_id, step}) == 0) {
    return absl::NotFoundError(
        absl::StrCat("job ", job_id, " has no checkpoint at step ", step));
  }
  return absl::OkStatus();
}

absl::Status InMemoryJobStore::DeleteJob(const std::string& job_id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (jobs_.erase(job_id) == 0) {
    return absl::NotFoundError(
        absl::StrCat("no job with id '", job_id, "' is stored"));
  }
  order_.erase(std::find(order_.begin(), order_.end(), job_id));
  events_.erase(job_id);
  for (auto it = checkpoints_.begin(); it != checkpoints_.end();) {
    it = it->first.first == job_id ? checkpoints_.erase(it) : std::next(it);
  }
  for (auto it = rendezvous_.begin(); it != rendezvous_.end();) {
    it = std::get<0>(it->first) == job_id ? rendezvous_.erase(it) : std::next(it);
  }
  return absl::OkStatus();
}

absl::Status InMemoryJobStore::PutRendezvousKey(const RendezvousRecord& record) {
  std::lock_guard<std::mutex> lock(mu_);
  rendezvous_[{record.job_id, record.generation, record.key}] = record.value;
  return absl::OkStatus();
}

absl::Status InMemoryJobStore::EraseRendezvousKey(const std::string& job_id,
                                                  int generation,
                                                  const std::string& key) {
  std::lock_guard<std::mutex> lock(mu_);
  rendezvous_.erase({job_id, generation, key});
  return absl::OkStatus();
}

absl::Status InMemoryJobStore::DropRendezvous(const std::string& job_id,
                                              int below_generation) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = rendezvous_.begin(); it != rendezvous_.end();) {
    it = std::get<0>(it->first) == job_id &&
                 std::get<1>(it->first) < below_generation
             ? rendezvous_.erase(it)
             : std::next(it);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<RendezvousRecord>> InMemoryJobStore::LoadRendezvous() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<RendezvousRecord> out;
  for (const auto& [where, value] : rendezvous_) {
    out.push_back({std::get<0>(where), std::get<1>(where), std::get<2>(where),
                   value});
  }
  return out;
}

}  // namespace trainctl::coordinator
