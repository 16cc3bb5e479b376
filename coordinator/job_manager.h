#pragma once

#include <cstdint>
#include <deque>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "coordinator/agent_link.h"
#include "coordinator/event_hub.h"
#include "coordinator/job_store.h"
#include "coordinator/report_limiter.h"
#include "coordinator/rendezvous.h"
#include "coordinator/scheduler.h"
#include "coordinator/scheduling_config.h"
#include "coordinator/store_writer.h"
#include "coordinator/usage_ledger.h"
#include "coordinator/worker_registry.h"
#include "trainctl/v1/jobs.pb.h"
#include "trainctl/v1/workers.pb.h"

namespace trainctl::coordinator {

// The world size in-place recovery goes on with: the most of `survivors`
// ranks, at least min_workers (and 1), that divides the global batch; 0
// when there is none.
int InPlaceWorldSize(int survivors, int min_workers, int64_t global_batch);

// Owns every job and drives it through its state machine: validates and
// queues submissions, gang-assigns ranks to worker slots when enough are
// free, turns rank exits and lost workers into final states, and records
// every change as an event. Every change is written through to the
// JobStore in the order the EventHub sees it: submissions and transitions
// durably before the call returns, rank states, metrics and logs grouped
// (see the store). Lifecycle: construct, Recover() once before serving,
// Flush() at shutdown. Thread-safe: one mutex guards all job and worker
// state; the writes to the store (StoreWriter) and then the messages to
// agents are carried out after it is released (Turn).
class JobManager {
 public:
  JobManager(const Clock& clock, EventHub& events, Rendezvous& rendezvous,
             JobStore& store, int64_t lease_ms, int64_t heartbeat_interval_ms);

  // Loads every stored job and re-seeds the EventHub with its events (same
  // seq numbers): QUEUED jobs rejoin the queue in their order, final jobs
  // are history, RESTARTING ones rejoin the queue first, and RUNNING ones
  // wait reattach_grace for their agents to re-adopt their ranks (after
  // which the generation restarts from its latest checkpoint).
  // Ids continue after the stored counter. Returns the store's error
  // (DATA_LOSS, FAILED_PRECONDITION, UNAVAILABLE...): do not serve then.
  // FAILED_PRECONDITION when jobs exist already.
  absl::Status Recover();
  // Called once the server serves: the agents' re-attach grace period counts
  // from now, not from Recover(), which takes long on a large database.
  void StartReattachWindow();
  // Makes every change so far durable (at shutdown).
  absl::Status Flush();
  // Called before the agent streams are torn down at shutdown: from now on a
  // closing stream no longer fails its jobs, so a graceful stop leaves the
  // same record as a kill -9 and recovery treats both alike.
  void PrepareForShutdown();

  // --- client side ---
  // INVALID_ARGUMENT listing every problem in the spec. With dry_run the job
  // is validated and returned (without an id) but not queued. UNAVAILABLE
  // (or the store's code) when the job could not be recorded durably; nothing
  // is queued then.
  // `resume_from` ("JOB" or "JOB:STEP") starts it from that job's latest or
  // given checkpoint: NOT_FOUND when the catalog has no such checkpoint.
  // `owner` is the submitter's user name ("" without authentication).
  absl::StatusOr<v1::Job> Submit(const std::string& spec_text, bool dry_run,
                                 const std::string& resume_from = "",
                                 const std::string& owner = "");
  // Submit's dry run with what would happen now (job_manager_dry_run.cc):
  // the validated job (no id) and the plan: ranks, slots needed vs free,
  // where it would run or why it would wait behind the queue, and the shard
  // plan. Same errors as Submit; records and reserves nothing.
  absl::StatusOr<v1::SubmitJobResponse> DryRun(
      const std::string& spec_text, const std::string& resume_from = "",
      const std::string& owner = "");
  // DryRun with the sample counts and shard plan from a connected worker,
  // which checks the spec's data where it lives (job_manager_probe.cc):
  // blocks up to ~12 s for its answer; without one the plan's data_note
  // says why the counts are unknown. Same errors as DryRun.
  absl::StatusOr<v1::SubmitJobResponse> DryRunOnWorker(
      const std::string& spec_text, const std::string& resume_from = "",
      const std::string& owner = "");
  // The coordinator's clock, for answers stamped with it (GetHistory).
  int64_t NowUnixMs() const { return clock_.NowUnixMs(); }
  // NOT_FOUND for an unknown id.
  absl::StatusOr<v1::Job> Get(const std::string& job_id) const;
  // In submission order; all jobs when `states` is empty.
  // With `owner`, only that user's jobs (the others are not copied).
  std::vector<v1::Job> List(const std::vector<v1::JobState>& states,
                            const std::string* owner = nullptr) const;
  // One page of List: the jobs after `after_id` (a job id, "" = from the
  // first), up to `max_jobs`, and stopping before the page's serialized
  // size would pass `max_bytes` (never fewer than one job). `more` says
  // that jobs follow.
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
  // Forgets a finished job: its record, events and checkpoint catalog (the
  // checkpoint files stay on the workers' disks). NOT_FOUND for an unknown
  // id; FAILED_PRECONDITION while it has not ended (cancel it first).
  absl::Status Delete(const std::string& job_id);

  // How long finished jobs are kept before CheckLeases deletes them: the
  // newest `max_finished_jobs`, none older than `max_age_ms` (0: no limit).
  struct Retention {
    int64_t max_finished_jobs = 10'000;
    int64_t max_age_ms = int64_t{90} * 24 * 3600 * 1000;
  };
  void SetRetention(const Retention& retention);

  // --- sharing the cluster (job_manager_queue.cc) ---
  // Replaces the priority classes, quotas and fair-share settings (at
  // startup and on SIGHUP) and runs a scheduling pass under them. Queued
  // jobs keep their class name; one whose class is gone counts as the
  // default class, and its log says so.
  void SetSchedulingConfig(SchedulingConfig config);
  // The pending jobs in the order the last pass considered them, with the
  // policy and each user's standing. With `viewer` (a non-admin), the
  // names of other users' jobs are left out.
  v1::GetQueueResponse Queue(const std::string* viewer = nullptr) const;
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
      const std::string& job_id);

  // --- agent side (`worker` is the name the stream registered with) ---
  // Sends `registered` on the link, then any assignments that now fit.
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
  // A worker's answer to DryRunOnWorker's question.
  void OnProbeDataResult(const std::string& worker,
                         const v1::ProbeDataResult& result);
  // FAILED_PRECONDITION when the worker does not run that rank.
  absl::Status OnRankStatus(const std::string& worker,
                            const v1::RankStatus& status);
  absl::Status OnRankMetrics(const std::string& worker,
                             const v1::RankMetrics& metrics);
  absl::Status OnRankLog(const std::string& worker, const v1::RankLog& log);

  // Called periodically: drops workers whose lease expired, restarts
  // generations with a hung rank, and gives up on ranks that did not come
  // back after a coordinator restart.
  void CheckLeases();

 private:
  // The dry run's memory plan: the least memory a rank may get among the
  // registered workers (a GPU's for GPU jobs, else a slot's share of its
  // node), and the warning when the plan is over it.
  void SetAvailableMemoryLocked(bool gpu, v1::MemoryPlan* memory) const;

  struct Outgoing {
    std::shared_ptr<AgentLink> link;
    v1::CoordinatorMessage message;
  };
  using Outbox = std::vector<Outgoing>;

  // One input's hold on mu_. Leaving its scope releases the lock, then
  // carries out the input's effects in one place: its store writes first
  // (waiting for the durable ones), then its messages to agents, so that
  // no agent hears of a transition a crash could still undo.
  class Turn {
   public:
    explicit Turn(JobManager& jobs) : jobs_(jobs), lock_(jobs.mu_) {}
    ~Turn();
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;
    Outbox* outbox() { return &outbox_; }
    // Queues the changes so far (SaveLocked), written after the lock.
    void Save() { write_.Add(jobs_.SaveLocked()); }
    void Add(StoreWriter::Ticket write) { write_.Add(std::move(write)); }

   private:
    JobManager& jobs_;
    std::unique_lock<std::mutex> lock_;
    Outbox outbox_;
    StoreWriter::Ticket write_;
  };

  v1::Job* FindLocked(const std::string& job_id);
  // NOT_FOUND for an unknown id, FAILED_PRECONDITION once the job ended.
  absl::StatusOr<v1::Job*> FindUnfinishedLocked(const std::string& job_id);
  void TransitionLocked(v1::Job& job, v1::JobState to,
                        const std::string& reason);
  void ScheduleLocked(Outbox* outbox);
  // The policy's input: `pending` and everything else as it stands.
  SchedulingInput InputLocked(std::vector<PendingJob> pending);
  // Puts the job's class in its spec (the default when it names none):
  // INVALID_ARGUMENT naming `priority` for a class it may not have.
  absl::Status ResolvePriority(v1::JobSpec* spec, const std::string& owner) const;
  // Fair share: charges the slot time of running jobs up to now.
  void ChargeUsageLocked(int64_t now);
  void ChargeJobLocked(const v1::Job& job, int64_t now);
  // The slots a running job is charged for: its ranks and its spares.
  int SlotsHeldLocked(const v1::Job& job) const;
  // At Recover: the usage of every job's past generations (each charged
  // as the ranks and spares the job holds now: past ones are not stored).
  void RebuildUsageLocked();
  // Keeps the pass's order, estimates and reasons; a job's log records a
  // decision when the kind of what it waits for changes.
  void RecordPassLocked(const ScheduleResult& result);
  void StartJobLocked(v1::Job& job, const Placement& placement,
                      Outbox* outbox);
  // Tells every agent still holding ranks of the job to kill them; with a
  // checkpoint_grace_ms >= 0, to have them checkpoint and stop within it.
  void StopRanksLocked(const v1::Job& job, const std::string& reason,
                       Outbox* outbox, int64_t checkpoint_grace_ms = -1);
  // Into queue_ in id order (submission order among equals).
  void EnqueueLocked(const std::string& job_id);

  // --- preemption (job_manager_preemption.cc) ---
  // The running job gives up its slots: its ranks checkpoint and stop
  // within grace_ms, and it waits as PREEMPTED to resume from that
  // checkpoint (no restart counted). `why` names who preempted it.
  void PreemptLocked(v1::Job& job, const std::string& why, int64_t grace_ms,
                     Outbox* outbox);
  // A rank's exit that preemption explains: a rank that stopped on a
  // request not from the scheduler (the job is preempted now), or the last
  // rank of a preempted generation that finished its last step anyway
  // (the job succeeds). True when it handled the exit.
  bool OnStoppedRankLocked(v1::Job& job, const std::string& worker,
                           const v1::RankStatus& status, Outbox* outbox);
  // After a coordinator restart: asks the re-adopted ranks of preempted
  // jobs (`jobs`) on this agent to checkpoint and stop again.
  void ResumeStoppingLocked(const std::set<std::string>& jobs,
                            const std::shared_ptr<AgentLink>& link,
                            Outbox* outbox);
  void EndJobLocked(v1::Job& job, v1::JobState to, const std::string& reason,
                    Outbox* outbox);
  void LoseWorkerLocked(const std::string& worker, const AgentLink* link,
                        const std::string& why, Outbox* outbox);
  // A worker lost while its job restarts on a peer's exit of a moment ago:
  // the job's reason and log name the loss as the cause.
  void NameLossAfterPeerExitLocked(v1::Job& job, const std::string& worker, int rank,
                                   const std::string& why);

  // --- fault tolerance (job_manager_faults.cc) ---
  // The current generation cannot go on: kill its ranks, then restart from
  // the latest checkpoint (RESTARTING, front of the queue) if restarts are
  // left, or end FAILED with `why`. `counted`: it uses up one of
  // fault_tolerance.max_restarts (a coordinator restart or a grow does not).
  // In-place recovery (job_manager_in_place.cc), tried before a counted
  // EndGenerationLocked once the lost ranks are marked EXITED or LOST: the
  // survivors go on as the next generation, renumbered in their old order,
  // on the most of them that divides the global batch and meets
  // min_workers (the rest are stopped). Free slots of the cluster take the
  // lost ranks' places first (replacements that get the survivors' state
  // over the collective), so the job keeps its world size where it can.
  // False, with nothing changed, when it does not apply (not asked for,
  // CUDA, a rank not yet in the group, too few left, no restarts left);
  // then `why` says why, where in-place recovery was asked for.
  bool RecoverInPlaceLocked(v1::Job& job, std::string& why, Outbox* outbox);
  // Free slots for up to `wanted` replacement ranks of `job` (a CPU job's),
  // counting the slots of its ranks `freeing` as free. With `use_spares`,
  // the spares held for it first, whoever waits; then other free slots,
  // but none while a queued job of a higher priority waits, since the
  // slots are its first (as a restart of `job` would queue behind it).
  // Never the spares held for another job of its priority or higher.
  Placement ReplacementSlotsLocked(const v1::Job& job, int wanted,
                                   const std::vector<int>& freeing,
                                   bool use_spares) const;
  // A queued job of a higher priority that could start waits for slots.
  bool HigherPriorityWaitsLocked(const v1::Job& job) const;
  // fault_tolerance.spares (job_manager_spares.cc). The registry's free
  // slots less the spares the last pass held for other jobs of `job`'s
  // priority or higher (and for `job` itself with `own_too`).
  std::vector<WorkerSlots> SlotsLeftForLocked(const v1::Job& job, bool own_too) const;
  // The spares a job holds while it runs: in-place recovery on the CPU.
  int SparesWantedLocked(const v1::Job& job) const;
  // Keeps the pass's spares and shows them on each job (spare_workers, and
  // a note in its log when they change).
  void RecordSparesLocked(const std::map<std::string, std::vector<std::string>>& held);
  // Forms `job`'s next generation from live rank processes: `survivors`
  // (old ranks, in order; those beyond `world` are stopped) keep their
  // state and are renumbered (RegroupRanks, planned when
  // `at_step_boundary`), `stateless` old ranks are stopped, and new ranks
  // on `spares` (at most world - survivors) join to receive the state.
  // Returns the new generation.
  int FormInPlaceLocked(v1::Job& job, const std::vector<int>& survivors,
                        const std::vector<int>& stateless, const Placement& spares,
                        int world, bool at_step_boundary, Outbox* outbox);
  // An elastic in-place job grows to `grown` ranks on free slots without
  // a restart: its ranks leave their group at the next step boundary and
  // the newcomers receive their state. False when its ranks are not all
  // past their start (the old way, a restart from the checkpoint, then
  // applies).
  bool GrowInPlaceLocked(v1::Job& job, int grown, Outbox* outbox);
  void EndGenerationLocked(v1::Job& job, const std::string& why, bool counted,
                           Outbox* outbox);
  // The newest cataloged checkpoint of the job, if any.
  std::optional<v1::Checkpoint> LatestCheckpointLocked(const std::string& job_id);
  // What the next generation of `job` loads: its latest checkpoint, else the
  // one it was submitted to resume from.
  v1::Checkpoint ResumePointLocked(const v1::Job& job);
  void CheckHangsLocked(Outbox* outbox);
  // Deletes finished jobs past the retention (a bounded number per call).
  [[nodiscard]] StoreWriter::Ticket RetireFinishedLocked();
  // Forgets the job and queues its deletion from the store.
  absl::StatusOr<StoreWriter::Ticket> DeleteLocked(const std::string& job_id);
  void CheckReattachLocked(Outbox* outbox);
  // Re-adopts the ranks a reconnecting agent reports; cancels those no job
  // generation owns any more.
  // Adds a cursor to `registered` for each rank it re-adopts.
  void ReattachRanksLocked(const v1::RegisterRequest& info,
                           const std::shared_ptr<AgentLink>& link,
                           v1::Registered* registered, Outbox* outbox);
  // Sets RankInfo.joined of the current generation's rank (the coordinator
  // heard from its process: progress, a metric or a log line); true when it
  // was not set before.
  bool MarkJoinedLocked(v1::Job& job, int rank);
  // False for a metrics/log seq already kept from that rank (a re-send).
  bool FreshReportLocked(v1::Job& job, int generation, int rank, int64_t seq);
  void MaybeGrowLocked(v1::Job& job, Outbox* outbox);
  // "JOB" (latest) or "JOB:STEP" from the catalog; takes the lock.
  absl::StatusOr<v1::Checkpoint> FindCheckpoint(const std::string& ref);
  // Scheduler input for a queued or restarting job.
  PendingJob PendingLocked(const v1::Job& job) const;
  // Whether `rank` of `job`'s current generation still holds (or, for a
  // preempted job whose agent has not reconnected since a coordinator
  // restart, may hold) a slot while it stops.
  bool StoppingLocked(const v1::Job& job, const v1::RankInfo& rank) const;
  // Scheduler input: the jobs whose ranks hold slots (those of a
  // restarting job are stopping), with their ETAs.
  std::vector<RunningJob> RunningLocked() const;
  absl::Status CheckRankOwnerLocked(const std::string& worker,
                                    const std::string& job_id, int generation,
                                    int rank) const;
  void Deliver(const Outbox& outbox);

  // Rank 0 found a straggler, or one that is back: kept in the job (for
  // status and the dashboard) and said in its log, naming the worker.
  void NoteStragglerLocked(v1::Job& job, const v1::MetricPoint& point);

  // --- durable state (job_manager_store.cc) ---
  // Says in the job's log that `dropped` reports of `rank` were cut.
  void RecordDroppedLocked(v1::Job& job, int rank, int64_t dropped,
                           const char* what);
  // A line of the coordinator's own in the job's log, as from `rank`.
  void RecordNoteLocked(v1::Job& job, int rank, const std::string& text);
  // Appends to the EventHub and queues the stamped event for the store.
  void RecordEventLocked(const std::string& job_id, v1::JobEvent event);
  void MarkDirtyLocked(const std::string& job_id) { dirty_.insert(job_id); }
  // Queues the changed jobs and new events as one group for the
  // StoreWriter (durable when they include a transition); the caller
  // drains the ticket once mu_ is released (Turn does).
  [[nodiscard]] StoreWriter::Ticket SaveLocked();

  const Clock& clock_;
  EventHub& events_;
  Rendezvous& rendezvous_;
  JobStore& store_;
  StoreWriter writer_;  // every write of jobs and events goes through it
  const int64_t heartbeat_interval_ms_;

  mutable std::mutex mu_;
  WorkerRegistry registry_;              // GUARDED_BY(mu_)
  std::map<std::string, v1::Job> jobs_;  // GUARDED_BY(mu_)
  std::vector<std::string> order_;       // submission order, GUARDED_BY(mu_)
  std::deque<std::string> queue_;        // QUEUED jobs, FIFO, GUARDED_BY(mu_)
  int64_t next_job_number_ = 1;          // GUARDED_BY(mu_)
  // Changes not yet queued for the store, all GUARDED_BY(mu_).
  std::set<std::string> dirty_;
  std::vector<v1::JobEvent> unsaved_events_;
  bool save_now_ = false;  // they include a transition: not grouped
  // Submissions between their id and their first durable write, by owner
  // (they count against the owner's limit). GUARDED_BY(mu_)
  std::map<std::string, int> submitting_;
  // Jobs submitted since Recover that no rank has checkpointed: their
  // catalog is known to be empty. GUARDED_BY(mu_)
  std::set<std::string> uncheckpointed_;
  bool shutting_down_ = false;
  // RUNNING jobs found at startup whose ranks may still be training: the
  // time by which their agents must re-adopt them. GUARDED_BY(mu_)
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
  Retention retention_;  // GUARDED_BY(mu_)
  // Dry runs waiting for a worker's data check, by request id.
  struct PendingProbe {
    std::string worker;  // the one asked; only it may answer
    std::promise<v1::ProbeDataResult> done;
  };
  std::map<std::string, PendingProbe> probes_;  // GUARDED_BY(mu_)
  int64_t next_probe_ = 1;                      // GUARDED_BY(mu_)
  // Per rank: a flood of log lines or metric points is cut to these rates
  // (far above what training prints), and the cut is said in the log.
  // What one job may keep of log lines and metric points over its whole
  // life: the rate limits bound a second, this bounds a week-long job (and
  // the memory and SQLite file behind every watcher's replay).
  struct EventBudget {
    int64_t log_bytes = 0;
    int64_t metric_points = 0;
    bool logs_cut = false, metrics_cut = false;  // said so in the job's log
  };
  // False once the job's log lines (or metric points) are over budget; the
  // first time, says so in the job's log.
  bool WithinBudgetLocked(v1::Job& job, int rank, int64_t log_bytes);
  std::map<std::string, EventBudget> budgets_;  // GUARDED_BY(mu_)
  // Sharing the cluster, all GUARDED_BY(mu_).
  SchedulingConfig scheduling_ = DefaultSchedulingConfig();
  UsageLedger usage_{scheduling_.half_life_hours};
  std::map<std::string, int64_t> charged_until_ms_;  // RUNNING jobs
  std::vector<std::string> pass_order_;  // the last pass's pending order
  std::map<std::string, int64_t> estimated_start_ms_;
  std::map<std::string, WaitKind> wait_kinds_;
  // The spare slots the last pass held, by job: one worker per slot.
  std::map<std::string, std::vector<std::string>> held_spares_;
  ReportLimiter log_limiter_{1000, 10'000};    // GUARDED_BY(mu_)
  ReportLimiter metric_limiter_{1000, 10'000};  // GUARDED_BY(mu_)
};

}  // namespace trainctl::coordinator
