#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coordinator/agent_link.h"
#include "coordinator/core/effects.h"
#include "coordinator/job_store.h"
#include "coordinator/report_limiter.h"
#include "coordinator/scheduler.h"
#include "coordinator/scheduling_config.h"
#include "coordinator/usage_ledger.h"
#include "coordinator/worker_registry.h"
#include "trainctl/v1/jobs.pb.h"
#include "trainctl/v1/workers.pb.h"

namespace trainctl::coordinator {

// The world size in-place recovery goes on with: the most of `survivors`
// ranks, at least min_workers (and 1), that divides the global batch; 0
// when there is none.
int InPlaceWorldSize(int survivors, int min_workers, int64_t global_batch);

// The coordinator's decisions, and nothing else: it owns every job and
// drives it through its state machine (queues submissions, gang-assigns
// ranks to worker slots, turns rank exits and lost workers into restarts,
// in-place recoveries or final states, keeps the checkpoint catalog and
// its retention, leases, re-attach and the scheduling policy), and
// records every change as an event. It does no I/O and takes no lock:
// each input (a submission, an agent's report, a tick) runs on the time
// given by SetNow and leaves its effects (effects.h) for TakeEffects, and
// its shell (JobManager) applies them. Not thread-safe: one input at a
// time. Tests drive it directly, with no fakes.
class JobCore {
 public:
  JobCore(int64_t lease_ms, int64_t heartbeat_interval_ms);

  // The time the next inputs happen at (the shell's clock).
  void SetNow(int64_t now_unix_ms) { now_ = now_unix_ms; }
  int64_t now() const { return now_; }
  // What the inputs since the last call decided, in order.
  Effects TakeEffects();

  // --- startup ---
  // What one job used of its event budget over its life (see WithinBudget).
  struct EventBudget {
    int64_t log_bytes = 0;
    int64_t metric_points = 0;
    bool logs_cut = false, metrics_cut = false;  // said so in the job's log
  };
  struct RecoveredJob {
    v1::Job job;
    int64_t last_seq = 0;  // its newest event's
    EventBudget used;
    std::vector<CheckpointRecord> catalog;  // in step order
  };
  struct Recovered {
    std::vector<RecoveredJob> jobs;  // in submission order
    int64_t next_job_number = 1;
  };
  struct RecoverySummary {
    int queued = 0, restarting = 0, interrupted = 0, finished = 0;
  };
  // What a stored event restores of its job (the newest train, eval and
  // plan points, each rank's last report seq) and counts against `used`:
  // the shell's scan of the store passes every event through here, in seq
  // order, before Restore.
  static void ReplayStoredEvent(const v1::JobEvent& e, v1::Job& job,
                                EventBudget& used);
  // Takes up the stored jobs: QUEUED jobs rejoin the queue in their order,
  // final jobs are history, RESTARTING ones rejoin the queue first, and
  // RUNNING ones wait reattach_grace for their agents to re-adopt their
  // ranks (after which the generation restarts from its latest
  // checkpoint). Ids continue after the stored counter.
  // FAILED_PRECONDITION when jobs exist already.
  absl::StatusOr<RecoverySummary> Restore(Recovered state);
  // The agents' re-attach grace period counts from now.
  void StartReattachWindow();
  // From now on a closing stream no longer fails its jobs, so a graceful
  // stop leaves the same record as a kill -9.
  void PrepareForShutdown() { shutting_down_ = true; }
  // Every change not yet saved, as one write.
  void SaveAll() { Save(); }
  bool has_jobs() const { return !jobs_.empty(); }

  // --- client side ---
  // Puts the job's class in its spec (the default when it names none):
  // INVALID_ARGUMENT naming `priority` for a class it may not have.
  absl::Status ResolvePriority(v1::JobSpec* spec,
                               const std::string& owner) const;
  // "JOB" (latest) or "JOB:STEP" from the catalog; NOT_FOUND naming what
  // is missing.
  absl::StatusOr<v1::Checkpoint> FindCheckpoint(const std::string& ref) const;
  // A job resuming from `from` must fit the checkpoint's job (when that
  // job is still known): INVALID_ARGUMENT naming the difference.
  absl::Status CheckResumeFits(const v1::Checkpoint& from,
                               const v1::JobSpec& spec) const;
  // A submission, in two steps around its durable write: Reserve gives
  // `job` (spec, owner, resume_from set) its id and first transition, or
  // RESOURCE_EXHAUSTED past the owner's limit of unfinished jobs; the
  // shell writes FirstWrite(job) durably, then Admit queues it, or Abandon
  // takes the reservation back when the write failed.
  absl::StatusOr<v1::Job> Reserve(v1::Job job);
  static JobWrite FirstWrite(const v1::Job& job);
  v1::Job Admit(v1::Job job);
  void Abandon(const v1::Job& job);
  // A parsed `spec` as a dry run: the validated job (no id), its plan, and
  // where it would run now or why it would wait behind the queue (the
  // scheduler's real answer). Same errors as a submission; records and
  // reserves nothing.
  absl::StatusOr<v1::SubmitJobResponse> DryRun(v1::JobSpec spec,
                                               const std::string& resume_from,
                                               const std::string& owner);
  // NOT_FOUND for an unknown id.
  absl::StatusOr<v1::Job> Get(const std::string& job_id) const;
  // One page of the jobs in submission order (all when `states` is
  // empty): the jobs after `after_id` (a job id, "" = from the first),
  // up to `max_jobs`, and stopping before the page's serialized size
  // would pass `max_bytes` (never fewer than one job). `more` says that
  // jobs follow. With `owner`, only that user's jobs.
  struct Page {
    std::vector<v1::Job> jobs;
    bool more = false;
  };
  Page ListPage(const std::vector<v1::JobState>& states,
                const std::string* owner, const std::string& after_id,
                size_t max_jobs, size_t max_bytes) const;
  // NOT_FOUND for an unknown id; FAILED_PRECONDITION when already final.
  absl::StatusOr<v1::Job> Cancel(const std::string& job_id,
                                 const std::string& reason);
  // Forgets a finished job: its record, events and checkpoint catalog.
  // NOT_FOUND for an unknown id; FAILED_PRECONDITION while it has not
  // ended.
  absl::Status Delete(const std::string& job_id);

  // How long finished jobs are kept before CheckLeases deletes them: the
  // newest `max_finished_jobs`, none older than `max_age_ms` (0: no limit).
  struct Retention {
    int64_t max_finished_jobs = 10'000;
    int64_t max_age_ms = int64_t{90} * 24 * 3600 * 1000;
  };
  void SetRetention(const Retention& retention) { retention_ = retention; }

  // --- sharing the cluster (queue.cc) ---
  // Replaces the priority classes, quotas and fair-share settings and runs
  // a scheduling pass under them. Queued jobs keep their class name; one
  // whose class is gone counts as the default class, and its log says so.
  void SetSchedulingConfig(SchedulingConfig config);
  // The pending jobs in the order the last pass considered them, with the
  // policy and each user's standing. With `viewer` (a non-admin), the
  // names of other users' jobs are left out.
  v1::GetQueueResponse Queue(const std::string* viewer, int64_t now) const;
  // Moves a job that has not ended to class `priority` and runs a pass.
  // INVALID_ARGUMENT naming `priority` for an unknown class or (with
  // kOwnersMaximum) one above the owner's max_class; NOT_FOUND for an
  // unknown job; FAILED_PRECONDITION once it ended. `by` goes in its log.
  enum class PriorityLimit { kOwnersMaximum, kAnyClass };
  absl::StatusOr<v1::Job> SetPriority(const std::string& job_id,
                                      const std::string& priority,
                                      PriorityLimit limit,
                                      const std::string& by);
  std::vector<v1::WorkerInfo> Workers() const;
  // The job's checkpoint catalog in step order; NOT_FOUND for an unknown id.
  absl::StatusOr<std::vector<v1::Checkpoint>> Checkpoints(
      const std::string& job_id) const;
  // The worker with the most free slots, for a dry run's data check;
  // nullptr when none is connected.
  const WorkerRegistry::Worker* RoomiestWorker() const;

  // --- agent side (`worker` is the name the stream registered with) ---
  // Queues `registered` for the link, then any assignments that now fit.
  absl::Status RegisterWorker(const v1::RegisterRequest& info,
                              std::shared_ptr<AgentLink> link);
  // The agent's stream closed: its ranks are lost.
  void WorkerDisconnected(const std::string& worker, const AgentLink* link);
  // How soon after a generation ended on a rank's exit a lost worker is
  // taken for that exit's cause (a node's peers notice its death first).
  static constexpr int64_t kPeerExitWindowMs = 5'000;
  void Heartbeat(const std::string& worker);
  // The ranks' progress carried by a heartbeat (hang detection).
  void OnProgress(const std::string& worker, const v1::Heartbeat& beat);
  // Catalogs rank 0's checkpoint, applies retention (asking the agent to
  // delete pruned files) and, for an elastic job, grows it if slots allow.
  absl::Status OnRankCheckpoint(const std::string& worker,
                                const v1::RankCheckpoint& checkpoint);
  // FAILED_PRECONDITION when the worker does not run that rank.
  absl::Status OnRankStatus(const std::string& worker,
                            const v1::RankStatus& status);
  absl::Status OnRankMetrics(const std::string& worker,
                             const v1::RankMetrics& metrics);
  absl::Status OnRankLog(const std::string& worker, const v1::RankLog& log);

  // The periodic tick: drops workers whose lease expired, restarts
  // generations with a hung rank, gives up on ranks that did not come
  // back after a coordinator restart, and retires finished jobs.
  void CheckLeases();

 private:
  // The dry run's memory plan: the least memory a rank may get among the
  // registered workers (a GPU's for GPU jobs, else a slot's share of its
  // node), and the warning when the plan is over it.
  void SetAvailableMemory(bool gpu, v1::MemoryPlan* memory) const;

  v1::Job* Find(const std::string& job_id);
  // NOT_FOUND for an unknown id, FAILED_PRECONDITION once the job ended.
  absl::StatusOr<v1::Job*> FindUnfinished(const std::string& job_id);
  void Transition(v1::Job& job, v1::JobState to, const std::string& reason);
  void SchedulePass(Outbox* outbox);
  // The policy's input: `pending` and everything else as it stands.
  SchedulingInput SchedulingInputFor(std::vector<PendingJob> pending);
  // Fair share: charges the slot time of running jobs up to now.
  void ChargeUsage(int64_t now);
  void ChargeJob(const v1::Job& job, int64_t now);
  // The slots a running job is charged for: its ranks and its spares.
  int SlotsHeld(const v1::Job& job) const;
  // At Restore: the usage of every job's past generations (each charged
  // as the ranks and spares the job holds now: past ones are not stored).
  void RebuildUsage();
  // Keeps the pass's order, estimates and reasons; a job's log records a
  // decision when the kind of what it waits for changes.
  void RecordPass(const ScheduleResult& result);
  void StartJob(v1::Job& job, const Placement& placement, Outbox* outbox);
  // Tells every agent still holding ranks of the job to kill them; with a
  // checkpoint_grace_ms >= 0, to have them checkpoint and stop within it.
  void StopRanks(const v1::Job& job, const std::string& reason, Outbox* outbox,
                 int64_t checkpoint_grace_ms = -1);
  // Into queue_ in id order (submission order among equals).
  void Enqueue(const std::string& job_id);

  // --- preemption (preemption.cc) ---
  // The running job gives up its slots: its ranks checkpoint and stop
  // within grace_ms, and it waits as PREEMPTED to resume from that
  // checkpoint (no restart counted). `why` names who preempted it.
  void Preempt(v1::Job& job, const std::string& why, int64_t grace_ms,
               Outbox* outbox);
  // A rank's exit that preemption explains: a rank that stopped on a
  // request not from the scheduler (the job is preempted now), or the last
  // rank of a preempted generation that finished its last step anyway
  // (the job succeeds). True when it handled the exit.
  bool OnStoppedRank(v1::Job& job, const std::string& worker,
                     const v1::RankStatus& status, Outbox* outbox);
  // After a coordinator restart: asks the re-adopted ranks of preempted
  // jobs (`jobs`) on this agent to checkpoint and stop again.
  void ResumeStopping(const std::set<std::string>& jobs,
                      const std::string& worker,
                      const std::shared_ptr<AgentLink>& link, Outbox* outbox);
  void EndJob(v1::Job& job, v1::JobState to, const std::string& reason,
              Outbox* outbox);
  void LoseWorker(const std::string& worker, const AgentLink* link,
                  const std::string& why, Outbox* outbox);
  // A worker lost while its job restarts on a peer's exit of a moment ago:
  // the job's reason and log name the loss as the cause.
  void NameLossAfterPeerExit(v1::Job& job, const std::string& worker, int rank,
                             const std::string& why);
  // A rank's failed exit heard just after a peer's exit that only reported
  // losing it (a collective's "reset by peer") ended the generation: the
  // job's reason and log name this exit as the cause.
  void NameExitAfterPeerExit(v1::Job& job, int rank, const std::string& exit,
                             const std::string& message);
  // Both of the above: `cause` (of `rank`) explains the generation that a
  // peer's exit ended a moment ago.
  void NameCauseOfEndedGeneration(v1::Job& job, int rank,
                                  const std::string& cause);

  // --- fault tolerance (faults.cc) ---
  // The current generation cannot go on: kill its ranks, then restart from
  // the latest checkpoint (RESTARTING, front of the queue) if restarts are
  // left, or end FAILED with `why`. `counted`: it uses up one of
  // fault_tolerance.max_restarts (a coordinator restart or a grow does not).
  // In-place recovery (in_place.cc), tried before a counted
  // EndGeneration once the lost ranks are marked EXITED or LOST: the
  // survivors go on as the next generation, renumbered in their old order,
  // on the most of them that divides the global batch and meets
  // min_workers (the rest are stopped). Free slots of the cluster take the
  // lost ranks' places first (replacements that get the survivors' state
  // over the collective), so the job keeps its world size where it can.
  // False, with nothing changed, when it does not apply (not asked for,
  // CUDA, a rank not yet in the group, too few left, no restarts left);
  // then `why` says why, where in-place recovery was asked for.
  bool RecoverInPlace(v1::Job& job, std::string& why, Outbox* outbox);
  // Free slots for up to `wanted` replacement ranks of `job` (a CPU job's),
  // counting the slots of its ranks `freeing` as free. With `use_spares`,
  // the spares held for it first, whoever waits; then other free slots,
  // but none while a queued job of a higher priority waits, since the
  // slots are its first (as a restart of `job` would queue behind it).
  // Never the spares held for another job of its priority or higher.
  Placement ReplacementSlots(const v1::Job& job, int wanted,
                             const std::vector<int>& freeing,
                             bool use_spares) const;
  // A queued job of a higher priority that could start waits for slots.
  bool HigherPriorityWaits(const v1::Job& job) const;
  // fault_tolerance.spares (spares.cc). The registry's free
  // slots less the spares the last pass held for other jobs of `job`'s
  // priority or higher (and for `job` itself with `own_too`).
  std::vector<WorkerSlots> SlotsLeftFor(const v1::Job& job, bool own_too) const;
  // The spares a job holds while it runs: in-place recovery on the CPU.
  int SparesWanted(const v1::Job& job) const;
  // Keeps the pass's spares and shows them on each job (spare_workers, and
  // a note in its log when they change).
  void RecordSpares(
      const std::map<std::string, std::vector<std::string>>& held);
  // Forms `job`'s next generation from live rank processes: `survivors`
  // (old ranks, in order; those beyond `world` are stopped) keep their
  // state and are renumbered (RegroupRanks, planned when
  // `at_step_boundary`), `stateless` old ranks are stopped, and new ranks
  // on `spares` (at most world - survivors) join to receive the state.
  // Returns the new generation.
  int FormInPlace(v1::Job& job, const std::vector<int>& survivors,
                  const std::vector<int>& stateless, const Placement& spares,
                  int world, bool at_step_boundary, Outbox* outbox);
  // An elastic in-place job grows to `grown` ranks on free slots without
  // a restart: its ranks leave their group at the next step boundary and
  // the newcomers receive their state. False when its ranks are not all
  // past their start (the old way, a restart from the checkpoint, then
  // applies).
  bool GrowInPlace(v1::Job& job, int grown, Outbox* outbox);
  void EndGeneration(v1::Job& job, const std::string& why, bool counted,
                     Outbox* outbox);
  // The newest cataloged checkpoint of the job, if any.
  std::optional<v1::Checkpoint> LatestCheckpoint(
      const std::string& job_id) const;
  // What the next generation of `job` loads: its latest checkpoint, else the
  // one it was submitted to resume from.
  v1::Checkpoint ResumePoint(const v1::Job& job) const;
  void CheckHangs(Outbox* outbox);
  // Deletes finished jobs past the retention (a bounded number per call).
  void RetireFinished();
  void CheckReattach(Outbox* outbox);
  // Re-adopts the ranks a reconnecting agent reports; cancels those no job
  // generation owns any more.
  // Adds a cursor to `registered` for each rank it re-adopts.
  void ReattachRanks(const v1::RegisterRequest& info,
                     const std::shared_ptr<AgentLink>& link,
                     v1::Registered* registered, Outbox* outbox);
  // Sets RankInfo.joined of the current generation's rank (the coordinator
  // heard from its process: progress, a metric or a log line); true when it
  // was not set before.
  bool MarkJoined(v1::Job& job, int rank);
  // False for a metrics/log seq already kept from that rank (a re-send).
  bool FreshReport(v1::Job& job, int generation, int rank, int64_t seq);
  void MaybeGrow(v1::Job& job, Outbox* outbox);
  // Scheduler input for a queued or restarting job.
  PendingJob PendingOf(const v1::Job& job) const;
  // Whether `rank` of `job`'s current generation still holds (or, for a
  // preempted job whose agent has not reconnected since a coordinator
  // restart, may hold) a slot while it stops.
  bool Stopping(const v1::Job& job, const v1::RankInfo& rank) const;
  // Scheduler input: the jobs whose ranks hold slots (those of a
  // restarting job are stopping), with their ETAs.
  std::vector<RunningJob> RunningJobs() const;
  absl::Status CheckRankOwner(const std::string& worker,
                              const std::string& job_id, int generation,
                              int rank) const;

  // Rank 0 found a straggler, or one that is back: kept in the job (for
  // status and the dashboard) and said in its log, naming the worker.
  void NoteStraggler(v1::Job& job, const v1::MetricPoint& point);

  // --- events and durable state (restore.cc) ---
  // Says in the job's log that `dropped` reports of `rank` were cut.
  void RecordDropped(v1::Job& job, int rank, int64_t dropped, const char* what);
  // A line of the coordinator's own in the job's log, as from `rank`.
  void RecordNote(v1::Job& job, int rank, const std::string& text);
  // Stamps the job's next seq on the event, for the watchers (an
  // EventAppended) and for the next Save.
  void RecordEvent(const std::string& job_id, v1::JobEvent event);
  void MarkDirty(const std::string& job_id) { dirty_.insert(job_id); }
  // A line for the operator's log, as an effect (LogLine).
  void Log(LogLevel level, std::string text, const char* file = __builtin_FILE(),
           int line = __builtin_LINE()) {
    effects_.log.push_back(LogLine{level, std::move(text), file, line});
  }
  // The changed jobs and new events as one SaveJobs (durable when they
  // include a transition).
  void Save();

  int64_t now_ = 0;
  Effects effects_;  // what the inputs decided, until TakeEffects
  const int64_t heartbeat_interval_ms_;

  WorkerRegistry registry_;
  std::map<std::string, v1::Job> jobs_;
  std::vector<std::string> order_;  // submission order,
  std::deque<std::string> queue_;   // QUEUED jobs, FIFO,
  int64_t next_job_number_ = 1;
  // Changes not yet queued for the store.
  std::set<std::string> dirty_;
  std::vector<v1::JobEvent> unsaved_events_;
  bool save_now_ = false;  // they include a transition: not grouped
  // Submissions between their id and their first durable write, by owner
  // (they count against the owner's limit).
  std::map<std::string, int> submitting_;
  // The checkpoint catalog, by job and step (the store keeps a copy).
  std::map<std::string, std::map<int64_t, CheckpointRecord>> catalog_;
  // Per job, the seq of its newest event (the EventHub numbers alike).
  std::map<std::string, int64_t> last_seq_;
  bool shutting_down_ = false;
  // RUNNING jobs found at startup whose ranks may still be training: the
  // time by which their agents must re-adopt them.
  std::map<std::string, int64_t> reattach_deadline_ms_;
  // Per job, the latest generation that logged a train point: every one of
  // its ranks was past its start then (in-place recovery's test, sooner
  // than their heartbeats tell).
  std::map<std::string, int> trained_generation_;
  // Per job, its latest generation formed by an in-place recovery, and
  // that generation's replacement ranks (no state until it logs a step).
  std::map<std::string, int> in_place_generation_;
  std::map<std::string, std::set<int>> in_place_newcomers_;
  const int64_t reattach_grace_ms_;
  Retention retention_;
  // Per rank: a flood of log lines or metric points is cut to these rates
  // (far above what training prints), and the cut is said in the log.
  // What one job may keep of log lines and metric points over its whole
  // life: the rate limits bound a second, this bounds a week-long job (and
  // the memory and SQLite file behind every watcher's replay).
  // False once the job's log lines (or metric points) are over budget; the
  // first time, says so in the job's log.
  bool WithinBudget(v1::Job& job, int rank, int64_t log_bytes);
  std::map<std::string, EventBudget> budgets_;
  // Sharing the cluster.
  SchedulingConfig scheduling_ = DefaultSchedulingConfig();
  UsageLedger usage_{scheduling_.half_life_hours};
  std::map<std::string, int64_t> charged_until_ms_;  // RUNNING jobs
  std::vector<std::string> pass_order_;  // the last pass's pending order
  std::map<std::string, int64_t> estimated_start_ms_;
  std::map<std::string, WaitKind> wait_kinds_;
  // The spare slots the last pass held, by job: one worker per slot.
  std::map<std::string, std::vector<std::string>> held_spares_;
  ReportLimiter log_limiter_{1000, 10'000};
  ReportLimiter metric_limiter_{1000, 10'000};
};

}  // namespace trainctl::coordinator
