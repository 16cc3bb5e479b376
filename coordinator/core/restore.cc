// JobCore's side of the durable state: taking up the stored jobs at
// startup, and the events and job snapshots it hands its shell to write.

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/vocabulary.h"
#include "coordinator/core/job_core.h"
#include "coordinator/job_state.h"

namespace trainctl::coordinator {

// What admitting a rank's report changes in its job is not written with
// the job (OnRankMetrics): the events have it. Applied to each stored
// event in seq order, it leaves the newest of each.
void JobCore::ReplayStoredEvent(const v1::JobEvent& e, v1::Job& job,
                                EventBudget& used) {
  if (e.has_log()) used.log_bytes += e.log().text().size();
  if (e.has_metric()) ++used.metric_points;
  const int rank = e.has_metric() ? e.metric().rank()
                   : e.has_log()  ? e.log().rank()
                                  : -1;
  if (e.report_seq() > 0 && e.generation() == job.generation() && rank >= 0 &&
      rank < job.ranks_size() &&
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

absl::StatusOr<JobCore::RecoverySummary> JobCore::Restore(Recovered state) {
  RecoverySummary summary;
  if (!jobs_.empty()) {
    return absl::FailedPreconditionError(
        "Restore() must run once, before any job exists");
  }
  next_job_number_ = std::max(next_job_number_, state.next_job_number);
  std::vector<std::string> running, restarting, preempted;
  for (RecoveredJob& stored : state.jobs) {
    const std::string id = stored.job.id();
    budgets_[id] = stored.used;
    last_seq_[id] = stored.last_seq;
    auto& catalog = catalog_[id];
    for (CheckpointRecord& c : stored.catalog) catalog[c.step] = std::move(c);
    if (catalog.empty()) catalog_.erase(id);
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
          MarkDirty(id);
        }
      }
    }
    if (job_state == v1::JOB_STATE_QUEUED) {
      queue_.push_back(id);
      ++summary.queued;
    } else if (job_state == v1::JOB_STATE_RUNNING) {
      running.push_back(id);
    } else if (job_state == v1::JOB_STATE_RESTARTING) {
      restarting.push_back(id);
    } else if (job_state == v1::JOB_STATE_PREEMPTED) {
      restarting.push_back(id);
      preempted.push_back(id);
    } else {
      ++summary.finished;
    }
  }
  // Restarting jobs were ahead of every queued one.
  queue_.insert(queue_.begin(), restarting.begin(), restarting.end());
  summary.restarting = static_cast<int>(restarting.size());
  const int64_t deadline = now_ + reattach_grace_ms_;
  for (const std::string& id : running) {
    // The ranks keep training without us; their agents re-adopt them when
    // they reconnect (ReattachRanks), or CheckReattach
    // restarts the generation after the grace period.
    v1::Job& job = jobs_.at(id);
    for (v1::RankInfo& rank : *job.mutable_ranks()) {
      if (rank.state() != v1::RANK_STATE_EXITED) {
        rank.set_state(v1::RANK_STATE_ASSIGNED);  // until re-adopted
      }
    }
    job.clear_progress();
    MarkDirty(id);
    effects_.changes.push_back(
        GenerationStarted{id, job.generation(), job.world_size()});
    reattach_deadline_ms_[id] = deadline;
    ++summary.interrupted;
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
    MarkDirty(id);
    reattach_deadline_ms_[id] = deadline;
  }
  RebuildUsage();
  SchedulePass(&effects_.messages);  // refreshes the pending reasons
  Save();
  return summary;
}

void JobCore::RecordEvent(const std::string& job_id, v1::JobEvent event) {
  event.set_seq(++last_seq_[job_id]);
  event.set_job_id(job_id);
  unsaved_events_.push_back(event);
  effects_.changes.push_back(EventAppended{job_id, std::move(event)});
}

void JobCore::Save() {
  if (dirty_.empty() && unsaved_events_.empty()) return;
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
  effects_.changes.push_back(SaveJobs{std::move(write), durability});
}

}  // namespace trainctl::coordinator
