// JobCore's intake of what ranks report through their agents: their
// starts and exits, metrics and log lines (numbered, so re-sends after a
// reconnect are dropped; bounded per job) and progress for hang detection.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/rank_exit.h"
#include "common/utf8_sanitize.h"
#include "common/vocabulary.h"
#include "coordinator/core/job_core.h"
#include "coordinator/hang_detector.h"
#include "coordinator/job_state.h"

namespace trainctl::coordinator {

absl::Status JobCore::OnRankStatus(const std::string& worker,
                                   const v1::RankStatus& status) {
  Outbox& outbox = effects_.messages;
  absl::Status owner = CheckRankOwner(worker, status.job_id(),
                                      status.generation(), status.rank());
  if (!owner.ok()) return owner;
  v1::Job& job = *Find(status.job_id());
  const bool current = status.generation() == job.generation() &&
                       job.state() == v1::JOB_STATE_RUNNING;
  v1::RankInfo* rank = job.mutable_ranks(status.rank());
  if (status.running()) {
    if (current && rank->state() != v1::RANK_STATE_RUNNING) {
      rank->set_state(v1::RANK_STATE_RUNNING);
      rank->set_pid(status.pid());
      MarkDirty(job.id());
      Save();
    }
    return absl::OkStatus();
  }
  registry_.Release(worker,
                    {status.job_id(), status.generation(), status.rank()});
  if (status.generation() == job.generation()) {
    for (int i = 0; i < job.progress_size(); ++i) {
      if (job.progress(i).rank() == status.rank()) {
        job.mutable_progress()->DeleteSubrange(i, 1);
        break;
      }
    }
  }
  // Whatever the agent sent (RankStatus.message is bytes): valid UTF-8
  // and bounded before it reaches reasons, logs and clients.
  const std::string message =
      EscapeControlCharacters(SanitizeUtf8(status.message(), 4096));
  if (status.generation() == job.generation()) {
    // Also after the job ended or its generation was given up: `status`
    // and the dashboard show how each rank of the last generation ended.
    rank->set_state(v1::RANK_STATE_EXITED);
    rank->set_exit_code(status.exit_code());
    rank->set_message(message);
    MarkDirty(job.id());
  }
  // How a failed exit is named in reasons and notes.
  std::string exit =
      absl::StrCat("rank ", status.rank(), " on worker ", worker,
                   " exited with code ", status.exit_code());
  if (!message.empty()) absl::StrAppend(&exit, ": ", message);
  const bool config_error = status.exit_code() == kRankExitConfigError;
  if (!config_error && OnStoppedRank(job, worker, status, &outbox)) {
    // preemption's own: a stop on request, or a preempted generation
  } else if (config_error && status.generation() == job.generation() &&
             !IsFinal(job.state())) {
    // Deterministic: every restart would fail the same way. Also when a
    // peer's exit already turned the generation into a restart.
    EndJob(job, v1::JOB_STATE_FAILED,
           absl::StrCat("rank ", status.rank(), " on worker ", worker,
                        " failed on the job's configuration or data "
                        "(not retried): ",
                        message.empty() ? "no message" : message),
           &outbox);
  } else if (current) {
    if (status.exit_code() != 0) {
      if (!RecoverInPlace(job, exit, &outbox)) {
        EndGeneration(job, exit, /*counted=*/true, &outbox);
      }
    } else if (std::all_of(job.ranks().begin(), job.ranks().end(),
                           [](const v1::RankInfo& r) {
                             return r.state() == v1::RANK_STATE_EXITED;
                           })) {
      EndJob(job, v1::JOB_STATE_SUCCEEDED,
             absl::StrCat("all ", job.ranks_size(), " ranks finished"),
             &outbox);
    }
  } else if (status.exit_code() != 0 &&
             status.generation() == job.generation() &&
             job.state() == v1::JOB_STATE_RESTARTING) {
    // The generation this rank ran in ended on a peer's exit a moment ago.
    NameExitAfterPeerExit(job, status.rank(), exit, message);
  }
  SchedulePass(&outbox);  // a slot came free
  Save();
  return absl::OkStatus();
}

absl::Status JobCore::OnRankMetrics(const std::string& worker,
                                    const v1::RankMetrics& metrics) {
  const v1::MetricPoint& point = metrics.point();
  absl::Status owner = CheckRankOwner(worker, metrics.job_id(),
                                      metrics.generation(), point.rank());
  if (!owner.ok()) return owner;
  v1::Job& job = *Find(metrics.job_id());
  if (metrics.generation() == job.generation()) {
    MarkJoined(job, point.rank());
  }
  if (IsFinal(job.state()) ||
      !FreshReport(job, metrics.generation(), point.rank(), metrics.seq())) {
    return absl::OkStatus();
  }
  const ReportLimiter::Decision rate =
      metric_limiter_.Admit(job.id(), point.rank(), now_);
  if (!rate.admit) return absl::OkStatus();
  if (rate.dropped_before > 0) {
    RecordDropped(job, point.rank(), rate.dropped_before, "metric points");
  }
  // After an in-place recovery the new rank 0 reports the interrupted
  // step's point again when it cannot know whether the lost rank 0 did:
  // one point per step.
  const MetricKind kind = ParseMetricKind(point.kind());
  if (kind == MetricKind::kTrain && job.has_latest_train() &&
      point.step() <= job.latest_train().step()) {
    auto in_place = in_place_generation_.find(job.id());
    if (in_place != in_place_generation_.end() &&
        in_place->second == metrics.generation()) {
      return absl::OkStatus();
    }
  }
  if (kind == MetricKind::kPlan) {
    auto it = point.values().find("total_steps");
    if (it != point.values().end()) {
      job.set_total_steps(static_cast<int64_t>(it->second));
    }
  } else if (kind == MetricKind::kEval) {
    *job.mutable_latest_eval() = point;
  } else if (kind == MetricKind::kTrain) {
    *job.mutable_latest_train() = point;
    if (metrics.generation() == job.generation()) {
      trained_generation_[job.id()] = job.generation();
    }
  } else if (kind == MetricKind::kStraggler &&
             metrics.generation() == job.generation()) {
    NoteStraggler(job, point);
  }
  // The job is not marked dirty: its latest points and total steps are
  // rebuilt from the metric events at Recover, and writing the whole job
  // per point was most of the coordinator's work with many ranks.
  if (WithinBudget(job, point.rank(), /*log_bytes=*/-1)) {
    v1::JobEvent event;
    event.set_time_unix_ms(point.time_unix_ms());
    event.set_generation(metrics.generation());
    event.set_report_seq(metrics.seq());
    *event.mutable_metric() = point;
    RecordEvent(job.id(), std::move(event));
  }
  Save();
  return absl::OkStatus();
}

void JobCore::NoteStraggler(v1::Job& job, const v1::MetricPoint& point) {
  const auto value = [&point](const char* key) {
    auto it = point.values().find(key);
    return it == point.values().end() ? 0.0 : it->second;
  };
  const int rank = static_cast<int>(value("rank"));
  if (rank < 0 || rank >= job.ranks_size()) return;
  const std::string phase = value("phase") == 0 ? "data" : "compute";
  const std::string& worker = job.ranks(rank).worker();
  auto* list = job.mutable_stragglers();
  for (int i = 0; i < list->size(); ++i) {
    if (list->Get(i).rank() == rank && list->Get(i).phase() == phase) {
      list->DeleteSubrange(i, 1);
      break;
    }
  }
  std::string line;
  if (value("recovered") != 0) {
    line = absl::StrFormat(
        "[trainctl] straggler: rank %d on worker %s is back within its "
        "peers' %s time (%.2fx their median at step %d)",
        rank, worker, phase, value("ratio"), point.step());
  } else {
    v1::Straggler* s = list->Add();
    s->set_rank(rank);
    s->set_worker(worker);
    s->set_phase(phase);
    s->set_ratio(value("ratio"));
    s->set_since_step(point.step());
    line = absl::StrFormat(
        "[trainctl] straggler: rank %d on worker %s spends %.2fx its peers' "
        "median %s time per step (%d steps in a row, at step %d); every rank "
        "waits for it in the all-reduce, the job goes on",
        rank, worker, value("ratio"), phase,
        static_cast<int64_t>(value("steps")), point.step());
  }
  RecordNote(job, rank, line);
  MarkDirty(job.id());
}

absl::Status JobCore::OnRankLog(const std::string& worker,
                                const v1::RankLog& log) {
  absl::Status owner =
      CheckRankOwner(worker, log.job_id(), log.generation(), log.line().rank());
  if (!owner.ok()) return owner;
  v1::Job& job = *Find(log.job_id());
  if (log.generation() == job.generation()) {
    MarkJoined(job, log.line().rank());
  }
  if (IsFinal(job.state()) ||
      !FreshReport(job, log.generation(), log.line().rank(), log.seq())) {
    return absl::OkStatus();
  }
  const ReportLimiter::Decision rate =
      log_limiter_.Admit(job.id(), log.line().rank(), now_);
  if (!rate.admit) return absl::OkStatus();
  if (rate.dropped_before > 0) {
    RecordDropped(job, log.line().rank(), rate.dropped_before, "log lines");
  }
  if (!WithinBudget(job, log.line().rank(),
                    static_cast<int64_t>(log.line().text().size()))) {
    Save();  // the note that the log is cut, if new
    return absl::OkStatus();
  }
  v1::JobEvent event;
  event.set_time_unix_ms(log.line().time_unix_ms());
  event.set_generation(log.generation());
  event.set_report_seq(log.seq());
  *event.mutable_log() = log.line();
  // Shown in terminals and logs: an ESC sequence or a newline in a rank's
  // output must print as what it is, not act (a forged log line, a retitled
  // terminal).
  event.mutable_log()->set_text(
      EscapeControlCharacters(SanitizeUtf8(log.line().text(), 16 * 1024)));
  RecordEvent(job.id(), std::move(event));
  Save();
  return absl::OkStatus();
}

namespace {

// Per job, over its whole life (JobCore::EventBudget).
constexpr int64_t kMaxLogBytesPerJob = int64_t{64} << 20;
constexpr int64_t kMaxMetricPointsPerJob = 2'000'000;

}  // namespace

bool JobCore::WithinBudget(v1::Job& job, int rank, int64_t log_bytes) {
  EventBudget& budget = budgets_[job.id()];
  const bool is_log = log_bytes >= 0;
  if (is_log) {
    budget.log_bytes += log_bytes;
    if (budget.log_bytes <= kMaxLogBytesPerJob) return true;
  } else {
    if (++budget.metric_points <= kMaxMetricPointsPerJob) return true;
  }
  bool& said = is_log ? budget.logs_cut : budget.metrics_cut;
  if (!said) {
    said = true;
    RecordNote(
        job, rank,
        is_log
            ? absl::StrCat("[trainctl] the job's log passed ",
                           kMaxLogBytesPerJob >> 20,
                           " MiB: later log lines are not kept")
            : absl::StrCat("[trainctl] the job passed ", kMaxMetricPointsPerJob,
                           " metric points: later points are not kept "
                           "(status still shows the latest)"));
  }
  return false;
}

void JobCore::RecordDropped(v1::Job& job, int rank, int64_t dropped,
                            const char* what) {
  RecordNote(
      job, rank,
      absl::StrCat("[trainctl] dropped ", dropped, " ", what, " of rank ", rank,
                   ": more than 1000 a second (the per-rank limit)"));
}

void JobCore::RecordNote(v1::Job& job, int rank, const std::string& text) {
  v1::JobEvent event;
  event.set_time_unix_ms(now_);
  v1::LogLine* line = event.mutable_log();
  line->set_rank(rank);
  line->set_stream("stderr");
  line->set_time_unix_ms(event.time_unix_ms());
  line->set_text(text);
  RecordEvent(job.id(), std::move(event));
}

bool JobCore::FreshReport(v1::Job& job, int generation, int rank, int64_t seq) {
  if (seq <= 0 || generation != job.generation() || rank < 0 ||
      rank >= job.ranks_size()) {
    return true;  // not numbered: nothing to deduplicate against
  }
  v1::RankInfo* info = job.mutable_ranks(rank);
  if (seq <= info->last_report_seq()) return false;
  // Not a reason to write the job: the event it admits carries the seq,
  // and Recover rebuilds the cursor from the events (RebuildReportState).
  info->set_last_report_seq(seq);
  return true;
}

void JobCore::OnProgress(const std::string& worker, const v1::Heartbeat& beat) {
  const int64_t now = now_;
  bool joined = false;  // some rank was heard from for the first time
  for (const v1::RankHeartbeat& rank : beat.ranks()) {
    if (!CheckRankOwner(worker, rank.job_id(), rank.generation(), rank.rank())
             .ok()) {
      continue;
    }
    v1::Job& job = *Find(rank.job_id());
    if (job.state() == v1::JOB_STATE_RUNNING &&
        rank.generation() == job.generation()) {
      RecordProgress(job, rank, now);
      if (MarkJoined(job, rank.rank())) joined = true;
    }
  }
  if (joined) Save();
}

bool JobCore::MarkJoined(v1::Job& job, int rank) {
  if (rank < 0 || rank >= job.ranks_size()) return false;
  v1::RankInfo* info = job.mutable_ranks(rank);
  if (info->joined()) return false;
  info->set_joined(true);
  MarkDirty(job.id());
  return true;
}

}  // namespace trainctl::coordinator
