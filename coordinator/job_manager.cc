// JobManager: the shell that runs JobCore's decisions on the real clock,
// store, event hub, rendezvous and agent links.

#include "coordinator/job_manager.h"

#include <type_traits>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/spec.h"
#include "common/status_macros.h"
#include "coordinator/job_state.h"

namespace trainctl::coordinator {

JobManager::JobManager(const Clock& clock, EventHub& events,
                       Rendezvous& rendezvous, JobStore& store,
                       int64_t lease_ms, int64_t heartbeat_interval_ms)
    : clock_(clock),
      events_(events),
      rendezvous_(rendezvous),
      store_(store),
      writer_(store, events, clock),
      core_(lease_ms, heartbeat_interval_ms) {}

JobManager::Turn::Turn(JobManager& jobs) : jobs_(jobs), lock_(jobs.mu_) {
  jobs_.core_.SetNow(jobs_.clock_.NowUnixMs());
}

absl::Status JobManager::Turn::Finish() {
  if (finished_) return absl::OkStatus();
  finished_ = true;
  Effects effects = jobs_.core_.TakeEffects();
  const StoreWriter::Ticket write = jobs_.ApplyLocked(effects.changes);
  lock_.unlock();
  const absl::Status written = jobs_.writer_.Drain(write);
  jobs_.Deliver(effects);
  return written;
}

StoreWriter::Ticket JobManager::ApplyLocked(std::vector<Change>& changes) {
  StoreWriter::Ticket ticket;
  for (Change& change : changes) {
    std::visit(
        [&](auto& c) {
          using T = std::decay_t<decltype(c)>;
          if constexpr (std::is_same_v<T, SaveJobs>) {
            ticket.Add(writer_.Enqueue(std::move(c.write), c.durability));
          } else if constexpr (std::is_same_v<T, DeleteJobRecords>) {
            ticket.Add(writer_.EnqueueDelete(c.job_id));
          } else if constexpr (std::is_same_v<T, CatalogPut>) {
            ticket.Add(writer_.EnqueuePutCheckpoint(std::move(c.record)));
          } else if constexpr (std::is_same_v<T, CatalogDelete>) {
            ticket.Add(writer_.EnqueueDeleteCheckpoint(c.job_id, c.step));
          } else if constexpr (std::is_same_v<T, EventAppended>) {
            const int64_t numbered = c.event.seq();
            const int64_t seq = events_.Append(c.job_id, std::move(c.event));
            // Both count from the stored history: a difference is a bug
            // that would show watchers events under the wrong numbers.
            if (seq != numbered) {
              TLOG_ERROR << "event " << numbered << " of " << c.job_id
                         << " became seq " << seq << " in the hub";
            }
            if (c.published) events_.Publish(c.job_id, seq);
          } else if constexpr (std::is_same_v<T, EventsClosed>) {
            events_.Close(c.job_id);
          } else if constexpr (std::is_same_v<T, EventsForgotten>) {
            events_.Forget(c.job_id);
          } else if constexpr (std::is_same_v<T, GenerationStarted>) {
            rendezvous_.ExpectWorld({c.job_id, c.generation}, c.world_size);
          } else if constexpr (std::is_same_v<T, GenerationsEnded>) {
            rendezvous_.EndGeneration(c.job_id, c.generation);
          } else if constexpr (std::is_same_v<T, RegroupPosted>) {
            rendezvous_.PostRegroup({c.job_id, c.from}, std::move(c.places));
          } else {
            static_assert(std::is_same_v<T, JobRendezvousDropped>);
            rendezvous_.DropJob(c.job_id);
          }
        },
        change);
  }
  return ticket;
}

void JobManager::Deliver(const Effects& effects) {
  for (const LogLine& line : effects.log) {
    WriteLogLine(line.level, line.file, line.line, line.text);
  }
  for (const AgentMessage& out : effects.messages) {
    if (!out.link->Send(out.message)) {
      TLOG_WARNING << "could not send to agent " << out.worker
                   << ": its stream is closing";
    }
  }
  for (const auto& link : effects.disconnect) link->Disconnect();
}

absl::Status JobManager::Recover() {
  // Every stored event passes through the core once; the hub gets only
  // the newest of each job's (it reads older ones from the store on demand).
  std::map<std::string, JobCore::EventBudget> used;
  EventScan scan;
  scan.keep_bytes = events_.tail_bytes();
  scan.visit = [&used](v1::Job& job, const v1::JobEvent& e) {
    JobCore::ReplayStoredEvent(e, job, used[job.id()]);
  };
  ASSIGN_OR_RETURN(StoredState state, store_.Load(scan));
  std::unique_lock<std::mutex> lock(mu_);
  if (core_.has_jobs()) {
    return absl::FailedPreconditionError(
        "Recover() must run once, before any job exists");
  }
  JobCore::Recovered recovered;
  recovered.next_job_number = state.next_job_number;
  for (StoredJob& stored : state.jobs) {
    const std::string id = stored.job.id();
    RETURN_IF_ERROR(events_.Restore(id, stored.last_seq,
                                    std::move(stored.events),
                                    IsFinal(stored.job.state())));
    ASSIGN_OR_RETURN(std::vector<CheckpointRecord> catalog,
                     store_.ListCheckpoints(id));
    recovered.jobs.push_back(JobCore::RecoveredJob{
        std::move(stored.job), stored.last_seq, used[id], std::move(catalog)});
  }
  core_.SetNow(clock_.NowUnixMs());
  ASSIGN_OR_RETURN(const JobCore::RecoverySummary summary,
                   core_.Restore(std::move(recovered)));
  Effects effects = core_.TakeEffects();  // no agent is connected yet
  const StoreWriter::Ticket saved = ApplyLocked(effects.changes);
  lock.unlock();
  // On disk before serving: what recovery changed is what agents see.
  RETURN_IF_ERROR(writer_.Drain(saved));
  RETURN_IF_ERROR(writer_.Flush());
  TLOG_INFO << "recovered " << state.jobs.size() << " jobs (" << summary.queued
            << " queued, " << summary.restarting << " restarting, "
            << summary.interrupted << " awaiting their ranks, "
            << summary.finished << " finished)";
  Deliver(effects);
  return absl::OkStatus();
}

void JobManager::StartReattachWindow() {
  Turn turn(*this);
  turn.core().StartReattachWindow();
}

absl::Status JobManager::Flush() {
  {
    Turn turn(*this);
    turn.core().SaveAll();
    RETURN_IF_ERROR(turn.Finish());
  }
  return writer_.Flush();
}

void JobManager::PrepareForShutdown() {
  Turn turn(*this);
  turn.core().PrepareForShutdown();
}

absl::StatusOr<v1::Job> JobManager::Submit(const std::string& spec_text,
                                           bool dry_run,
                                           const std::string& resume_from,
                                           const std::string& owner) {
  if (dry_run) {
    ASSIGN_OR_RETURN(v1::SubmitJobResponse dry,
                     DryRun(spec_text, resume_from, owner));
    return dry.job();
  }
  ASSIGN_OR_RETURN(v1::JobSpec spec, ParseJobSpec(spec_text));
  // First its id and its durable record, then (only if that worked) the
  // job in the core: the commit happens outside mu_, and no one sees a
  // job that a failed write would have to take back.
  v1::Job job;
  StoreWriter::Ticket recorded;
  {
    Turn turn(*this);
    JobCore& core = turn.core();
    RETURN_IF_ERROR(core.ResolvePriority(&spec, owner));
    job.set_owner(owner);
    if (!resume_from.empty()) {
      ASSIGN_OR_RETURN(v1::Checkpoint from, core.FindCheckpoint(resume_from));
      RETURN_IF_ERROR(core.CheckResumeFits(from, spec));
      *job.mutable_resume_from() = std::move(from);
    }
    *job.mutable_spec() = std::move(spec);
    ASSIGN_OR_RETURN(job, core.Reserve(std::move(job)));
    recorded = writer_.EnqueueNewJob(JobCore::FirstWrite(job));
  }
  const absl::Status saved = writer_.Drain(recorded);
  v1::Job snapshot;
  {
    Turn turn(*this);
    if (!saved.ok()) {
      turn.core().Abandon(job);
      TLOG_ERROR << "cannot record a submitted job: " << saved.message();
      return absl::UnavailableError(absl::StrCat(
          "the coordinator cannot record the job: ", saved.message()));
    }
    snapshot = turn.core().Admit(std::move(job));
  }
  TLOG_INFO << "job " << snapshot.id() << " (" << snapshot.spec().name()
            << ") submitted, " << snapshot.spec().ranks() << " ranks";
  return snapshot;
}

absl::StatusOr<v1::SubmitJobResponse> JobManager::DryRun(
    const std::string& spec_text, const std::string& resume_from,
    const std::string& owner) {
  ASSIGN_OR_RETURN(v1::JobSpec spec, ParseJobSpec(spec_text));
  Turn turn(*this);
  return turn.core().DryRun(std::move(spec), resume_from, owner);
}

absl::StatusOr<v1::Job> JobManager::Get(const std::string& job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return core_.Get(job_id);
}

std::vector<v1::Job> JobManager::List(const std::vector<v1::JobState>& states,
                                      const std::string* owner) const {
  return ListPage(states, owner, "", SIZE_MAX, SIZE_MAX).jobs;
}

JobManager::Page JobManager::ListPage(const std::vector<v1::JobState>& states,
                                      const std::string* owner,
                                      const std::string& after_id,
                                      size_t max_jobs, size_t max_bytes) const {
  std::lock_guard<std::mutex> lock(mu_);
  return core_.ListPage(states, owner, after_id, max_jobs, max_bytes);
}

absl::StatusOr<v1::Job> JobManager::Cancel(const std::string& job_id,
                                           const std::string& reason) {
  Turn turn(*this);  // recorded before the caller hears of it
  return turn.core().Cancel(job_id, reason);
}

absl::Status JobManager::Delete(const std::string& job_id) {
  Turn turn(*this);
  RETURN_IF_ERROR(turn.core().Delete(job_id));
  if (absl::Status s = turn.Finish(); !s.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "job ", job_id,
        " is forgotten, but its record could not be removed "
        "from the state database yet (retried with the next change): ",
        s.message()));
  }
  return absl::OkStatus();
}

void JobManager::SetRetention(const Retention& retention) {
  Turn turn(*this);
  turn.core().SetRetention(retention);
}

void JobManager::SetSchedulingConfig(SchedulingConfig config) {
  Turn turn(*this);
  turn.core().SetSchedulingConfig(std::move(config));
}

v1::GetQueueResponse JobManager::Queue(const std::string* viewer) const {
  std::lock_guard<std::mutex> lock(mu_);
  return core_.Queue(viewer, clock_.NowUnixMs());
}

absl::StatusOr<v1::Job> JobManager::SetPriority(const std::string& job_id,
                                                const std::string& priority,
                                                PriorityLimit limit,
                                                const std::string& by) {
  Turn turn(*this);
  return turn.core().SetPriority(job_id, priority, limit, by);
}

std::vector<v1::WorkerInfo> JobManager::Workers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return core_.Workers();
}

absl::StatusOr<std::vector<v1::Checkpoint>> JobManager::Checkpoints(
    const std::string& job_id) const {
  std::lock_guard<std::mutex> lock(mu_);
  return core_.Checkpoints(job_id);
}

absl::Status JobManager::RegisterWorker(const v1::RegisterRequest& info,
                                        std::shared_ptr<AgentLink> link) {
  Turn turn(*this);
  return turn.core().RegisterWorker(info, std::move(link));
}

void JobManager::WorkerDisconnected(const std::string& worker,
                                    const AgentLink* link) {
  Turn turn(*this);
  turn.core().WorkerDisconnected(worker, link);
}

void JobManager::Heartbeat(const std::string& worker) {
  Turn turn(*this);
  turn.core().Heartbeat(worker);
}

void JobManager::OnProgress(const std::string& worker,
                            const v1::Heartbeat& beat) {
  Turn turn(*this);
  turn.core().OnProgress(worker, beat);
}

absl::Status JobManager::OnRankCheckpoint(
    const std::string& worker, const v1::RankCheckpoint& checkpoint) {
  Turn turn(*this);
  return turn.core().OnRankCheckpoint(worker, checkpoint);
}

absl::Status JobManager::OnRankStatus(const std::string& worker,
                                      const v1::RankStatus& status) {
  Turn turn(*this);
  return turn.core().OnRankStatus(worker, status);
}

absl::Status JobManager::OnRankMetrics(const std::string& worker,
                                       const v1::RankMetrics& metrics) {
  Turn turn(*this);
  return turn.core().OnRankMetrics(worker, metrics);
}

absl::Status JobManager::OnRankLog(const std::string& worker,
                                   const v1::RankLog& log) {
  Turn turn(*this);
  return turn.core().OnRankLog(worker, log);
}

void JobManager::CheckLeases() {
  Turn turn(*this);
  turn.core().CheckLeases();
}

}  // namespace trainctl::coordinator
