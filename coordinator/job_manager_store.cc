// JobManager's side of the durable state: recovery at startup and the
// write-through of changes to the JobStore.

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/status_macros.h"
#include "common/vocabulary.h"
#include "coordinator/job_manager.h"
#include "coordinator/job_state.h"

namespace trainctl::coordinator {

namespace {

// What admitting a rank's report changes in its job is not written with
// the job (OnRankMetrics): the events have it. Applied to each stored
// event in seq order, it leaves the newest of each.
void RebuildReportState(const v1::JobEvent& e, v1::Job& job) {
  const int rank = e.has_metric() ? e.metric().rank()
                   : e.has_log()  ? e.log().rank()
                                  : -1;
  if (e.report_seq() > 0 && e.generation() == job.generation() &&
      rank >= 0 && rank < job.ranks_size() &&
      e.report_seq() > job.ranks(rank).last_report_seq()) {
    job.mutable_ranks(rank)->set_last_report_seq(e.report_seq());
  }
  if (!e.has_metric()) return;
  const v1::MetricPoint& point = e.metric();
  const MetricKind kind = ParseMetricKind(point.kind());
  if (kind == MetricKind::kTrain) {
    *job.mutable_latest_train() = point;
  } else if (kind == MetricKind::kEval) {
    *job.mutable_latest_eval() = point;
  } else if (kind == MetricKind::kPlan) {
    auto it = point.values().find("total_steps");
    if (it != point.values().end()) {
      job.set_total_steps(static_cast<int64_t>(it->second));
    }
  }
}

}  // namespace

absl::Status JobManager::Recover() {
  // Every stored event passes through here once; the hub gets only the
  // newest of each job's (it reads older ones from the store on demand).
  std::map<std::string, EventBudget> used;  // what each job already used
  EventScan scan;
  scan.keep_bytes = events_.tail_bytes();
  scan.visit = [&used](v1::Job& job, const v1::JobEvent& e) {
    EventBudget& budget = used[job.id()];
    if (e.has_log()) budget.log_bytes += e.log().text().size();
    if (e.has_metric()) ++budget.metric_points;
    RebuildReportState(e, job);
  };
  ASSIGN_OR_RETURN(StoredState state, store_.Load(scan));
  Outbox outbox;  // stays empty: no agent is connected yet
  StoreWriter::Ticket saved;
  int queued = 0, interrupted = 0, finished = 0;
  size_t restarting_count = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!jobs_.empty()) {
      return absl::FailedPreconditionError(
          "Recover() must run once, before any job exists");
    }
    next_job_number_ = std::max(next_job_number_, state.next_job_number);
    std::vector<std::string> running, restarting, preempted;
    for (StoredJob& stored : state.jobs) {
      const std::string id = stored.job.id();
      const bool is_final = IsFinal(stored.job.state());
      budgets_[id] = used[id];
      RETURN_IF_ERROR(events_.Restore(id, stored.last_seq,
                                      std::move(stored.events), is_final));
      const v1::JobState job_state = stored.job.state();
      jobs_[id] = std::move(stored.job);
      order_.push_back(id);
      if (IsFinal(job_state)) {
        // Their exits, if any came, are lost with the old process; a
        // restarted agent's re-sent exit is no longer accepted.
        for (v1::RankInfo& rank : *jobs_[id].mutable_ranks()) {
          if (rank.state() == v1::RANK_STATE_ASSIGNED ||
              rank.state() == v1::RANK_STATE_RUNNING) {
            rank.set_state(v1::RANK_STATE_LOST);
            rank.set_message(
                "the coordinator restarted before this rank's exit was heard");
            MarkDirtyLocked(id);
          }
        }
      }
      if (job_state == v1::JOB_STATE_QUEUED) {
        queue_.push_back(id);
        ++queued;
      } else if (job_state == v1::JOB_STATE_RUNNING) {
        running.push_back(id);
      } else if (job_state == v1::JOB_STATE_RESTARTING) {
        restarting.push_back(id);
      } else if (job_state == v1::JOB_STATE_PREEMPTED) {
        restarting.push_back(id);
        preempted.push_back(id);
      } else {
        ++finished;
      }
    }
    // Restarting jobs were ahead of every queued one.
    queue_.insert(queue_.begin(), restarting.begin(), restarting.end());
    restarting_count = restarting.size();
    const int64_t deadline = clock_.NowUnixMs() + reattach_grace_ms_;
    for (const std::string& id : running) {
      // The ranks keep training without us; their agents re-adopt them when
      // they reconnect (ReattachRanksLocked), or CheckReattachLocked
      // restarts the generation after the grace period.
      v1::Job& job = jobs_.at(id);
      for (v1::RankInfo& rank : *job.mutable_ranks()) {
        if (rank.state() != v1::RANK_STATE_EXITED) {
          rank.set_state(v1::RANK_STATE_ASSIGNED);  // until re-adopted
        }
      }
      job.clear_progress();
      MarkDirtyLocked(id);
      rendezvous_.ExpectWorld({id, job.generation()}, job.world_size());
      reattach_deadline_ms_[id] = deadline;
      ++interrupted;
    }
    for (const std::string& id : preempted) {
      // Its ranks may still be checkpointing: until their agents re-adopt
      // them (and they stop), or the grace period ends, their slots are
      // taken and the job does not resume from an older checkpoint.
      for (v1::RankInfo& rank : *jobs_.at(id).mutable_ranks()) {
        if (rank.state() == v1::RANK_STATE_RUNNING) {
          rank.set_state(v1::RANK_STATE_ASSIGNED);
        }
      }
      MarkDirtyLocked(id);
      reattach_deadline_ms_[id] = deadline;
    }
    RebuildUsageLocked();
    ScheduleLocked(&outbox);  // refreshes the pending reasons
    saved = SaveLocked();
  }
  // On disk before serving: what recovery changed is what agents see.
  RETURN_IF_ERROR(writer_.Drain(saved));
  RETURN_IF_ERROR(writer_.Flush());
  TLOG_INFO << "recovered " << state.jobs.size() << " jobs (" << queued
            << " queued, " << restarting_count << " restarting, "
            << interrupted << " awaiting their ranks, "
            << finished << " finished); next id job-" << next_job_number_;
  Deliver(outbox);
  return absl::OkStatus();
}

absl::Status JobManager::Flush() {
  StoreWriter::Ticket saved;
  {
    std::lock_guard<std::mutex> lock(mu_);
    saved = SaveLocked();
  }
  RETURN_IF_ERROR(writer_.Drain(saved));
  return writer_.Flush();
}

void JobManager::PrepareForShutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutting_down_ = true;
}

void JobManager::RecordEventLocked(const std::string& job_id,
                                   v1::JobEvent event) {
  const int64_t seq = events_.Append(job_id, event);
  event.set_seq(seq);
  event.set_job_id(job_id);
  unsaved_events_.push_back(std::move(event));
}

StoreWriter::Ticket JobManager::SaveLocked() {
  if (dirty_.empty() && unsaved_events_.empty()) return {};
  JobWrite write;
  for (const std::string& id : dirty_) write.jobs.push_back(jobs_.at(id));
  write.events = std::move(unsaved_events_);
  write.next_job_number = next_job_number_;
  const Durability durability =
      save_now_ ? Durability::kImmediate : Durability::kGrouped;
  dirty_.clear();
  unsaved_events_.clear();
  save_now_ = false;
  // Watchers see the events once the writer has them on disk, so that no
  // seq they were shown is ever reused after a crash (EventHub).
  return writer_.Enqueue(std::move(write), durability);
}

JobManager::Turn::~Turn() {
  lock_.unlock();
  // A failed write was logged and stays queued for the next one.
  jobs_.writer_.Drain(write_).IgnoreError();
  jobs_.Deliver(outbox_);
}

}  // namespace trainctl::coordinator
