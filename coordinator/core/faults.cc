// JobCore's fault tolerance: restarting generations from checkpoints,
// the checkpoint catalog, hang detection, re-adopting ranks after a
// coordinator restart, and elastic growth.

#include <algorithm>
#include <optional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/checkpoint_name.h"
#include "common/status_macros.h"
#include "common/vocabulary.h"
#include "coordinator/checkpoint_retention.h"
#include "coordinator/core/job_core.h"
#include "coordinator/hang_detector.h"
#include "coordinator/job_state.h"

namespace trainctl::coordinator {

void JobCore::EndGeneration(v1::Job& job, const std::string& why, bool counted,
                            Outbox* outbox) {
  const int max_restarts = job.spec().fault_tolerance().max_restarts();
  if (counted && job.restarts() >= max_restarts) {
    EndJob(job, v1::JOB_STATE_FAILED,
           max_restarts == 0
               ? why
               : absl::StrCat(why, "; no restarts left (", job.restarts(),
                              " of ", max_restarts, " used)"),
           outbox);
    return;
  }
  if (counted) job.set_restarts(job.restarts() + 1);
  StopRanks(job, why, outbox);
  effects_.changes.push_back(GenerationsEnded{job.id(), job.generation()});
  reattach_deadline_ms_.erase(job.id());
  job.clear_progress();
  const v1::Checkpoint from = ResumePoint(job);
  std::string reason = counted ? absl::StrCat(why, "; restart ", job.restarts(),
                                              " of ", max_restarts)
                               : absl::StrCat(why, "; restarting");
  absl::StrAppend(&reason, from.path().empty()
                               ? " from the beginning (no checkpoint yet)"
                               : absl::StrCat(" from the checkpoint at step ",
                                              from.step()));
  Transition(job, v1::JOB_STATE_RESTARTING, reason);
  queue_.push_front(job.id());
  SchedulePass(outbox);
}

std::optional<v1::Checkpoint> JobCore::LatestCheckpoint(
    const std::string& job_id) const {
  auto catalog = catalog_.find(job_id);
  if (catalog == catalog_.end() || catalog->second.empty()) return std::nullopt;
  return catalog->second.rbegin()->second.info;
}

v1::Checkpoint JobCore::ResumePoint(const v1::Job& job) const {
  if (std::optional<v1::Checkpoint> latest = LatestCheckpoint(job.id())) {
    return *latest;
  }
  // Not yet checkpointed itself: start where it was submitted to start.
  return job.resume_from().job_id() != job.id() ? job.resume_from()
                                                : v1::Checkpoint();
}

absl::StatusOr<v1::Checkpoint> JobCore::FindCheckpoint(
    const std::string& text) const {
  ASSIGN_OR_RETURN(const CheckpointRef ref,
                   ParseCheckpointRef(text, "resume_from"));
  if (jobs_.count(ref.job_id) == 0) {
    return absl::NotFoundError(
        absl::StrCat("resume_from: no job with id '", ref.job_id, "'"));
  }
  auto catalog = catalog_.find(ref.job_id);
  if (catalog == catalog_.end() || catalog->second.empty()) {
    return absl::NotFoundError(
        absl::StrCat("resume_from: job ", ref.job_id, " has no checkpoints"));
  }
  const std::map<int64_t, CheckpointRecord>& steps = catalog->second;
  if (!ref.step) return steps.rbegin()->second.info;
  auto at = steps.find(*ref.step);
  if (at != steps.end()) return at->second.info;
  std::vector<std::string> known;
  for (const auto& [step, c] : steps) known.push_back(absl::StrCat(step));
  return absl::NotFoundError(absl::StrCat(
      "resume_from: job ", ref.job_id, " has no checkpoint at step ", *ref.step,
      " (it has steps ", absl::StrJoin(known, ", "), ")"));
}

absl::StatusOr<std::vector<v1::Checkpoint>> JobCore::Checkpoints(
    const std::string& job_id) const {
  if (jobs_.count(job_id) == 0) {
    return absl::NotFoundError(absl::StrCat("no job with id '", job_id, "'"));
  }
  std::vector<v1::Checkpoint> out;
  auto catalog = catalog_.find(job_id);
  if (catalog == catalog_.end()) return out;
  for (const auto& [step, c] : catalog->second) out.push_back(c.info);
  return out;
}

absl::Status JobCore::OnRankCheckpoint(const std::string& worker,
                                       const v1::RankCheckpoint& message) {
  Outbox& outbox = effects_.messages;
  v1::Job* found = Find(message.job_id());
  // Rank 0 of the job's latest generation writes its checkpoints; after a
  // coordinator outage its report may arrive after its exit (and the job's
  // end), and must still be cataloged, or retention never sees the file.
  if (found == nullptr || found->ranks_size() == 0 ||
      found->ranks(0).worker() != worker) {
    return CheckRankOwner(worker, message.job_id(), message.generation(), 0);
  }
  v1::Job& job = *found;
  // A late report of a generation that was already replaced would mix two
  // histories; the one that is running now writes its own.
  if (message.generation() != job.generation()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "checkpoint of generation ", message.generation(), " of job ", job.id(),
        " arrived after generation ", job.generation(), " started; ignored"));
  }
  // Re-sent after a reconnect (numbered with rank 0's reports): once.
  if (!FreshReport(job, message.generation(), 0, message.seq())) {
    return absl::OkStatus();
  }
  const v1::CheckpointSpec& spec = job.spec().checkpoint();
  v1::Checkpoint info = message.checkpoint();
  // Only the job's own files: a resume or restart loads what the catalog
  // names, so a worker may not point it anywhere else.
  const std::string own_dir = absl::StrCat(spec.dir(), "/", job.id(), "/");
  const std::string name =
      info.path().substr(std::min(info.path().size(), own_dir.size()));
  const std::optional<CheckpointName> parsed =
      name.find('/') == std::string::npos ? ParseCheckpointFileName(name)
                                          : std::nullopt;
  if (spec.dir().empty() || !absl::StartsWith(info.path(), own_dir) ||
      !parsed) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint of job ", job.id(), " reported outside ",
                     own_dir, "step-*.ckpt; not cataloged"));
  }
  const CheckpointName file = *parsed;
  // The name fences generations (a stale writer has its own files): the
  // one reported must be this generation's file of this step. Or the
  // previous generation's, when this one was formed in place: the same
  // rank 0 process wrote it just before the regroup renamed it.
  auto in_place = in_place_generation_.find(job.id());
  const bool same_process = in_place != in_place_generation_.end() &&
                            in_place->second == message.generation() &&
                            file.generation == message.generation() - 1;
  if (file.step != info.step() ||
      (file.generation != 0 && file.generation != message.generation() &&
       !same_process)) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint of job ", job.id(), " at step ", info.step(),
                     " of generation ", message.generation(), " reported as ",
                     name, "; not cataloged"));
  }
  info.set_job_id(job.id());
  info.set_generation(file.generation != 0 ? file.generation
                                           : message.generation());
  CheckpointRecord record;
  record.job_id = job.id();
  record.step = info.step();
  record.path = info.path();
  record.created_unix_ms = info.created_unix_ms();
  record.metric = BestByValue(info, spec);
  record.info = info;
  std::map<int64_t, CheckpointRecord>& catalog = catalog_[job.id()];
  catalog[record.step] = record;
  effects_.changes.push_back(CatalogPut{std::move(record)});
  v1::DeleteCheckpoints prune;
  const auto* connected = registry_.Find(worker);
  // Pruned only where the agent can delete the files too; otherwise the
  // next checkpoint prunes them.
  if (connected != nullptr) {
    std::vector<v1::Checkpoint> infos;
    for (const auto& [step, c] : catalog) infos.push_back(c.info);
    std::set<int64_t> pruned;
    for (int64_t step : CheckpointsToPrune(infos, spec)) {
      prune.add_paths(catalog.at(step).path);
      catalog.erase(step);
      effects_.changes.push_back(CatalogDelete{job.id(), step});
      pruned.insert(step);
    }
    // What stays, so the agent also removes older files the catalog
    // forgot with their deletion in flight (lost with a coordinator).
    int64_t oldest_kept = 0;
    for (const v1::Checkpoint& c : infos) {
      if (pruned.count(c.step()) != 0) continue;
      prune.add_keep(c.path());
      if (oldest_kept == 0 || c.step() < oldest_kept) oldest_kept = c.step();
    }
    prune.set_stale_below_step(oldest_kept);
  }
  if (prune.paths_size() > 0 || prune.stale_below_step() > 0) {
    prune.set_job_id(job.id());
    prune.set_dir(absl::StrCat(spec.dir(), "/", job.id()));
    v1::CoordinatorMessage m;
    *m.mutable_delete_checkpoints() = std::move(prune);
    outbox.push_back({connected->link, worker, std::move(m)});
  }
  v1::JobEvent event;
  event.set_time_unix_ms(info.created_unix_ms());
  v1::MetricPoint* point = event.mutable_metric();
  point->set_kind(MetricKindName(MetricKind::kCheckpoint));
  point->set_step(info.step());
  point->set_epoch(info.epoch());
  point->set_time_unix_ms(info.created_unix_ms());
  (*point->mutable_values())["bytes"] = static_cast<double>(info.bytes());
  (*point->mutable_values())["world_size"] = info.world_size();
  (*point->mutable_values())["blocked_ms"] = info.blocked_ms();
  (*point->mutable_values())["write_ms"] = info.write_ms();
  RecordEvent(job.id(), std::move(event));
  MaybeGrow(job, &outbox);
  Save();
  return absl::OkStatus();
}

PendingJob JobCore::PendingOf(const v1::Job& job) const {
  PendingJob pending;
  pending.id = job.id();
  pending.ranks = job.spec().ranks();
  pending.device = job.spec().training().device();
  pending.user = job.owner();
  pending.priority = scheduling_.ValueOf(job.spec().priority());
  pending.spares = SparesWanted(job);
  const bool preempted = job.state() == v1::JOB_STATE_PREEMPTED;
  if (job.state() != v1::JOB_STATE_RESTARTING && !preempted) return pending;
  pending.resuming = true;
  const v1::FaultToleranceSpec& ft = job.spec().fault_tolerance();
  pending.ranks = std::max(ft.max_workers(), 1);
  pending.min_ranks = std::max(ft.min_workers(), 1);
  pending.batch = job.spec().training().batch_size();
  int stopping = 0;
  for (const v1::RankInfo& rank : job.ranks()) {
    stopping += Stopping(job, rank);
  }
  if (stopping > 0) {
    pending.not_ready = absl::StrCat(
        "waiting for ", stopping, " rank", stopping == 1 ? "" : "s",
        " of generation ", job.generation(), " to ",
        preempted ? "checkpoint and stop" : "stop");
  }
  return pending;
}

bool JobCore::Stopping(const v1::Job& job, const v1::RankInfo& rank) const {
  if (registry_.Holds(rank.worker(),
                      {job.id(), job.generation(), rank.rank()})) {
    return true;
  }
  // After a coordinator restart, a preempted generation's ranks whose
  // agents have not reconnected yet may still be writing its checkpoint.
  return job.state() == v1::JOB_STATE_PREEMPTED &&
         reattach_deadline_ms_.count(job.id()) != 0 &&
         rank.state() != v1::RANK_STATE_EXITED &&
         rank.state() != v1::RANK_STATE_LOST;
}

std::vector<RunningJob> JobCore::RunningJobs() const {
  const int64_t now = now_;
  std::vector<RunningJob> running;
  for (const std::string& id : order_) {
    const v1::Job& job = jobs_.at(id);
    if (job.state() != v1::JOB_STATE_RUNNING &&
        job.state() != v1::JOB_STATE_RESTARTING &&
        job.state() != v1::JOB_STATE_PREEMPTED) {
      continue;
    }
    RunningJob r;
    for (const v1::RankInfo& rank : job.ranks()) {
      const bool holds = registry_.Holds(
          rank.worker(), {job.id(), job.generation(), rank.rank()});
      if (!holds && !Stopping(job, rank)) continue;
      ++r.slots;
      if (rank.gpu_slot()) ++r.gpu_slots;
      r.rank_workers.push_back(rank.worker());
    }
    if (r.slots == 0) continue;
    r.id = job.id();
    r.user = job.owner();
    r.priority = scheduling_.ValueOf(job.spec().priority());
    r.stopping = job.state() != v1::JOB_STATE_RUNNING;
    r.spares = SparesWanted(job);
    // Its first start: a restart or a resume does not make it the newest
    // of its owner's jobs (the first to count as borrowing).
    for (const v1::Transition& t : job.transitions()) {
      if (t.to() == v1::JOB_STATE_RUNNING) {
        r.started_unix_ms = t.time_unix_ms();
        break;
      }
    }
    // Stopped without a checkpoint, it would lose all it trained.
    r.preemptible = !job.spec().checkpoint().dir().empty();
    r.grace_ms = scheduling_.GraceOf(job.spec().priority());
    const v1::FaultToleranceSpec& ft = job.spec().fault_tolerance();
    if (ft.elastic()) {
      r.min_ranks = std::max(ft.min_workers(), 1);
      r.batch = job.spec().training().batch_size();
    }
    // The ETA from this generation's pace so far; unknown before a step.
    const int64_t done = job.latest_train().step() - job.resume_from().step();
    const int64_t left = job.total_steps() - job.latest_train().step();
    if (!r.stopping && done > 0 && left >= 0 && job.started_unix_ms() > 0) {
      r.eta_unix_ms = now + (now - job.started_unix_ms()) * left / done;
    }
    running.push_back(std::move(r));
  }
  return running;
}

void JobCore::CheckHangs(Outbox* outbox) {
  const int64_t now = now_;
  for (const std::string& id : order_) {
    v1::Job& job = jobs_.at(id);
    if (job.state() != v1::JOB_STATE_RUNNING) continue;
    std::optional<std::string> hang =
        FindHang(job, now, HangTimeouts::ForJob(job));
    if (hang) EndGeneration(job, *hang, /*counted=*/true, outbox);
  }
}

void JobCore::ReattachRanks(const v1::RegisterRequest& info,
                            const std::shared_ptr<AgentLink>& link,
                            v1::Registered* registered, Outbox* outbox) {
  std::set<std::pair<std::string, int>> cancel;   // (job, generation)
  std::set<std::pair<std::string, int>> adopted;  // (job, rank)
  std::set<std::string> stopping;  // preempted jobs with ranks still running
  for (const v1::RankStatus& status : info.ranks()) {
    v1::Job* job = Find(status.job_id());
    // A preempted generation's ranks too: they are checkpointing, and
    // their checkpoint and exit are still to be heard.
    const bool owned = job != nullptr &&
                       (job->state() == v1::JOB_STATE_RUNNING ||
                        job->state() == v1::JOB_STATE_PREEMPTED) &&
                       job->generation() == status.generation() &&
                       status.rank() >= 0 &&
                       status.rank() < job->ranks_size() &&
                       job->ranks(status.rank()).worker() == info.name();
    if (!owned) {
      if (status.running())
        cancel.insert({status.job_id(), status.generation()});
      continue;
    }
    v1::RankInfo* rank = job->mutable_ranks(status.rank());
    if (rank->state() == v1::RANK_STATE_EXITED) continue;
    // An exited rank is adopted too: its last reports and then its exit
    // follow, re-sent by the agent in that order.
    registry_.Occupy(info.name(), {job->id(), job->generation(), status.rank()},
                     rank->gpu_slot());
    Log(LogLevel::kInfo, absl::StrCat("re-adopted rank ", status.rank(), " of ",
                                      job->id(), " on ", info.name()));
    // A rank may be listed twice (not reaped yet, and its exit): one
    // cursor, or the agent would re-send its reports twice.
    if (adopted.insert({job->id(), status.rank()}).second) {
      v1::RankCursor* cursor = registered->add_cursors();
      cursor->set_job_id(job->id());
      cursor->set_generation(job->generation());
      cursor->set_rank(status.rank());
      cursor->set_last_seq(rank->last_report_seq());
    }
    if (status.running()) {
      rank->set_state(v1::RANK_STATE_RUNNING);
      rank->set_pid(status.pid());
      MarkDirty(job->id());
      if (job->state() == v1::JOB_STATE_PREEMPTED) stopping.insert(job->id());
    }
  }
  ResumeStopping(stopping, info.name(), link, outbox);
  for (const auto& [job_id, generation] : cancel) {
    v1::CoordinatorMessage m;
    m.mutable_cancel()->set_job_id(job_id);
    m.mutable_cancel()->set_generation(generation);
    m.mutable_cancel()->set_reason(
        "no current job generation owns these ranks any more");
    outbox->push_back({link, info.name(), std::move(m)});
  }
}

void JobCore::StartReattachWindow() {
  const int64_t deadline = now_ + reattach_grace_ms_;
  for (auto& [id, job_deadline] : reattach_deadline_ms_)
    job_deadline = deadline;
}

void JobCore::CheckReattach(Outbox* outbox) {
  const int64_t now = now_;
  std::vector<std::string> settled, overdue;
  for (const auto& [id, deadline] : reattach_deadline_ms_) {
    const v1::Job& job = jobs_.at(id);
    bool all_back = true;
    for (const v1::RankInfo& rank : job.ranks()) {
      if (rank.state() != v1::RANK_STATE_EXITED &&
          rank.state() != v1::RANK_STATE_LOST &&
          !registry_.Holds(rank.worker(),
                           {id, job.generation(), rank.rank()})) {
        all_back = false;
      }
    }
    if (all_back) {
      settled.push_back(id);  // every rank is accounted for
    } else if (now >= deadline) {
      overdue.push_back(id);
    }
  }
  for (const std::string& id : settled) reattach_deadline_ms_.erase(id);
  bool stopped = false;
  for (const std::string& id : overdue) {
    reattach_deadline_ms_.erase(id);
    v1::Job& job = jobs_.at(id);
    if (job.state() == v1::JOB_STATE_PREEMPTED) {
      // Already stopping: what did not come back is lost, and the job
      // resumes from its newest checkpoint when slots allow.
      for (v1::RankInfo& rank : *job.mutable_ranks()) {
        if (rank.state() == v1::RANK_STATE_EXITED ||
            rank.state() == v1::RANK_STATE_LOST ||
            registry_.Holds(rank.worker(),
                            {id, job.generation(), rank.rank()})) {
          continue;
        }
        rank.set_state(v1::RANK_STATE_LOST);
        rank.set_message(absl::StrCat("its worker did not come back within ",
                                      reattach_grace_ms_ / 1000,
                                      " s of the coordinator restarting"));
      }
      MarkDirty(id);
      stopped = true;
      continue;
    }
    EndGeneration(
        job,
        absl::StrCat("not every rank of generation ", job.generation(),
                     " came back within ", reattach_grace_ms_ / 1000,
                     " s of the coordinator restarting"),
        /*counted=*/false, outbox);
  }
  if (stopped) SchedulePass(outbox);  // its slots may be all it waited for
}

void JobCore::MaybeGrow(v1::Job& job, Outbox* outbox) {
  const v1::FaultToleranceSpec& ft = job.spec().fault_tolerance();
  if (!ft.elastic() || job.state() != v1::JOB_STATE_RUNNING ||
      job.world_size() >= ft.max_workers() || !queue_.empty()) {
    return;
  }
  // Spares, its own too, are kept for replacements, not grown into.
  int free = 0;
  for (const WorkerSlots& w : SlotsLeftFor(job, /*own_too=*/true))
    free += w.free_slots;
  const int64_t batch = job.spec().training().batch_size();
  int grown = 0;
  for (int n = std::min(ft.max_workers(), job.world_size() + free);
       n > job.world_size() && grown == 0; --n) {
    if (batch % n == 0) grown = n;
  }
  if (grown == 0) return;
  // In place where it can: no restart, no step repeated. A CUDA job, or
  // one whose ranks are not all past their start, restarts bigger from the
  // checkpoint just reported.
  if (ft.in_place() && GrowInPlace(job, grown, outbox)) return;
  EndGeneration(job,
                absl::StrCat("growing from ", job.world_size(), " to ", grown,
                             " ranks (elastic)"),
                /*counted=*/false, outbox);
}

}  // namespace trainctl::coordinator
