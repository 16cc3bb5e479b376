#pragma once

#include <cstdint>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "coordinator/agent_link.h"
#include "coordinator/core/job_core.h"
#include "coordinator/event_hub.h"
#include "coordinator/job_store.h"
#include "coordinator/rendezvous.h"
#include "coordinator/scheduling_config.h"
#include "coordinator/store_writer.h"
#include "trainctl/v1/jobs.pb.h"
#include "trainctl/v1/workers.pb.h"

namespace trainctl::coordinator {

// The coordinator's jobs as its services see them: a thread-safe shell
// around JobCore, which makes every decision. Each call takes the lock,
// gives the core its input stamped with the clock, applies the effects
// the core returns in one place (store writes queued in order, events to
// the EventHub, rendezvous scopes opened and closed), releases the lock,
// waits for the durable writes, and only then sends the messages to
// agents (Turn). Everything written reaches the JobStore in the order the
// EventHub sees it: submissions and transitions durably before the call
// returns, rank states, metrics and logs grouped (see the store).
// Lifecycle: construct, Recover() once before serving, Flush() at
// shutdown. The dry run's data check (job_manager_probe.cc) waits for a
// worker's answer here, outside the core.
class JobManager {
 public:
  using Page = JobCore::Page;
  using Retention = JobCore::Retention;
  using PriorityLimit = JobCore::PriorityLimit;
  static constexpr int64_t kPeerExitWindowMs = JobCore::kPeerExitWindowMs;

  JobManager(const Clock& clock, EventHub& events, Rendezvous& rendezvous,
             JobStore& store, int64_t lease_ms, int64_t heartbeat_interval_ms);

  // Loads every stored job, re-seeds the EventHub with its events (same
  // seq numbers) and hands them to the core (JobCore::Restore says what
  // becomes of each). Returns the store's error (DATA_LOSS,
  // FAILED_PRECONDITION, UNAVAILABLE...): do not serve then.
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
  // Submit's dry run with what would happen now (JobCore::DryRun). Same
  // errors as Submit; records and reserves nothing.
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
  // One page of List (JobCore::ListPage).
  Page ListPage(const std::vector<v1::JobState>& states,
                const std::string* owner, const std::string& after_id,
                size_t max_jobs, size_t max_bytes) const;
  // NOT_FOUND for an unknown id; FAILED_PRECONDITION when already final.
  absl::StatusOr<v1::Job> Cancel(const std::string& job_id,
                                 const std::string& reason);
  // Forgets a finished job: its record, events and checkpoint catalog (the
  // checkpoint files stay on the workers' disks). NOT_FOUND for an unknown
  // id; FAILED_PRECONDITION while it has not ended (cancel it first);
  // UNAVAILABLE when its records could not be removed yet (retried).
  absl::Status Delete(const std::string& job_id);
  void SetRetention(const Retention& retention);

  // --- sharing the cluster: JobCore's (core/queue.cc) ---
  void SetSchedulingConfig(SchedulingConfig config);
  v1::GetQueueResponse Queue(const std::string* viewer = nullptr) const;
  absl::StatusOr<v1::Job> SetPriority(const std::string& job_id,
                                      const std::string& priority,
                                      PriorityLimit limit,
                                      const std::string& by);
  std::vector<v1::WorkerInfo> Workers() const;
  absl::StatusOr<std::vector<v1::Checkpoint>> Checkpoints(
      const std::string& job_id) const;

  // --- agent side (`worker` is the name the stream registered with) ---
  // JobCore's inputs of the same names (core/job_core.h says what each
  // decides); RegisterWorker's `registered` goes out on the link first.
  absl::Status RegisterWorker(const v1::RegisterRequest& info,
                              std::shared_ptr<AgentLink> link);
  void WorkerDisconnected(const std::string& worker, const AgentLink* link);
  void Heartbeat(const std::string& worker);
  void OnProgress(const std::string& worker, const v1::Heartbeat& beat);
  absl::Status OnRankCheckpoint(const std::string& worker,
                                const v1::RankCheckpoint& checkpoint);
  absl::Status OnRankStatus(const std::string& worker,
                            const v1::RankStatus& status);
  absl::Status OnRankMetrics(const std::string& worker,
                             const v1::RankMetrics& metrics);
  absl::Status OnRankLog(const std::string& worker, const v1::RankLog& log);
  // Called periodically (lease/4): JobCore::CheckLeases.
  void CheckLeases();
  // A worker's answer to DryRunOnWorker's question.
  void OnProbeDataResult(const std::string& worker,
                         const v1::ProbeDataResult& result);

 private:
  // One input's hold on mu_, with the core's time set to the clock's.
  // Finish (or leaving its scope) applies the core's effects under the
  // lock, releases it, waits for the durable writes, then sends the
  // messages and ends the links to drop.
  class Turn {
   public:
    explicit Turn(JobManager& jobs);
    ~Turn() { Finish().IgnoreError(); }
    Turn(const Turn&) = delete;
    Turn& operator=(const Turn&) = delete;
    JobCore& core() { return jobs_.core_; }
    // The status of the durable writes (OK for grouped ones); a failed
    // write was logged and stays queued for the next one.
    absl::Status Finish();

   private:
    JobManager& jobs_;
    std::unique_lock<std::mutex> lock_;
    bool finished_ = false;
  };

  // Carries out the core's changes in order (under mu_): what the store
  // writer must drain once the lock is released.
  StoreWriter::Ticket ApplyLocked(std::vector<Change>& changes);
  void Deliver(const Effects& effects);

  const Clock& clock_;
  EventHub& events_;
  Rendezvous& rendezvous_;
  JobStore& store_;
  StoreWriter writer_;  // every write of jobs and events goes through it

  mutable std::mutex mu_;
  JobCore core_;  // GUARDED_BY(mu_)
  // Dry runs waiting for a worker's data check, by request id.
  struct PendingProbe {
    std::string worker;  // the one asked; only it may answer
    std::promise<v1::ProbeDataResult> done;
  };
  std::map<std::string, PendingProbe> probes_;  // GUARDED_BY(mu_)
  int64_t next_probe_ = 1;                      // GUARDED_BY(mu_)
};

}  // namespace trainctl::coordinator
