#include "coordinator/core/job_core.h"

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/spec.h"
#include "common/status_macros.h"
#include "coordinator/job_state.h"
#include "coordinator/resume_check.h"
#include "coordinator/scheduler.h"

namespace trainctl::coordinator {
namespace {

constexpr int kMaxUnfinishedJobsPerUser = 1000;

// A new job's first event (seq 1): its submission.
v1::JobEvent FirstEvent(const v1::Job& job) {
  v1::JobEvent event;
  event.set_seq(1);
  event.set_job_id(job.id());
  event.set_time_unix_ms(job.created_unix_ms());
  *event.mutable_transition() = job.transitions(0);
  return event;
}

// The N of "job-N" (ids are only ever made that way); 0 otherwise.
int64_t JobNumber(const std::string& id) {
  int64_t number = 0;
  absl::string_view digits = id;
  if (!absl::ConsumePrefix(&digits, "job-") ||
      !absl::SimpleAtoi(digits, &number)) {
    return 0;
  }
  return number;
}

// Inserts a job id into ids in id order, which is the store's order, even
// when a submission whose write finished first took a later id (found from
// the back: almost always the end).
template <typename Ids>
void InsertInIdOrder(Ids& ids, const std::string& id) {
  const int64_t number = JobNumber(id);
  auto at = ids.end();
  while (at != ids.begin() && JobNumber(*std::prev(at)) > number) --at;
  ids.insert(at, id);
}

}  // namespace

void JobCore::Enqueue(const std::string& job_id) {
  InsertInIdOrder(queue_, job_id);
}

JobCore::JobCore(int64_t lease_ms, int64_t heartbeat_interval_ms)
    : heartbeat_interval_ms_(heartbeat_interval_ms),
      registry_(lease_ms),
      // Long enough for agents to notice the outage and reconnect (their
      // backoff tops out at 5 s) with a lease to spare.
      reattach_grace_ms_(2 * lease_ms + 5'000) {}

Effects JobCore::TakeEffects() {
  Effects taken = std::move(effects_);
  effects_ = Effects();
  return taken;
}

absl::Status JobCore::CheckResumeFits(const v1::Checkpoint& from,
                                      const v1::JobSpec& spec) const {
  // Refused now, naming the difference, rather than by every rank at
  // every restart.
  auto source = jobs_.find(from.job_id());
  if (source == jobs_.end()) return absl::OkStatus();
  return CheckResumeCompatible(source->second.spec(), source->first, spec);
}

absl::StatusOr<v1::Job> JobCore::Reserve(v1::Job job) {
  const std::string owner = job.owner();
  // A flood of submissions from one user stays bounded (each job keeps
  // its spec in memory and on disk until it ends and is retired).
  auto pending = submitting_.find(owner);
  int unfinished = pending == submitting_.end() ? 0 : pending->second;
  for (const auto& [id, other] : jobs_) {
    unfinished += other.owner() == owner && !IsFinal(other.state());
  }
  if (unfinished >= kMaxUnfinishedJobsPerUser) {
    return absl::ResourceExhaustedError(absl::StrCat(
        owner.empty() ? "this cluster" : owner, " already has ", unfinished,
        " jobs queued or running, the limit; wait for some to end or "
        "cancel some"));
  }
  const int64_t number = next_job_number_++;
  ++submitting_[owner];
  job.set_id(absl::StrCat("job-", number));
  job.set_state(v1::JOB_STATE_QUEUED);
  job.set_created_unix_ms(now_);
  auto* t = job.add_transitions();
  t->set_to(v1::JOB_STATE_QUEUED);
  t->set_time_unix_ms(job.created_unix_ms());
  t->set_reason("submitted");
  return job;
}

JobWrite JobCore::FirstWrite(const v1::Job& job) {
  // Durable before the id is handed out: a restart never forgets (or
  // reuses) an id a client was given.
  JobWrite write;
  write.jobs.push_back(job);
  write.events.push_back(FirstEvent(job));
  write.next_job_number = JobNumber(job.id()) + 1;
  return write;
}

void JobCore::Abandon(const v1::Job& job) {
  if (--submitting_[job.owner()] == 0) submitting_.erase(job.owner());
  // The id goes back unless a later submission took the next one.
  const int64_t number = JobNumber(job.id());
  if (next_job_number_ == number + 1) next_job_number_ = number;
}

v1::Job JobCore::Admit(v1::Job job) {
  if (--submitting_[job.owner()] == 0) submitting_.erase(job.owner());
  const std::string id = job.id();
  v1::JobEvent first = FirstEvent(job);
  jobs_.emplace(id, std::move(job));
  InsertInIdOrder(order_, id);
  Enqueue(id);
  last_seq_[id] = 1;
  // Written with the job, durably: the watchers may see it at once.
  effects_.changes.push_back(
      EventAppended{id, std::move(first), /*published=*/true});
  SchedulePass(&effects_.messages);
  Save();
  return jobs_.at(id);
}

absl::StatusOr<v1::Job> JobCore::Get(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) {
    return absl::NotFoundError(absl::StrCat("no job with id '", job_id, "'"));
  }
  return it->second;
}

JobCore::Page JobCore::ListPage(const std::vector<v1::JobState>& states,
                                const std::string* owner,
                                const std::string& after_id, size_t max_jobs,
                                size_t max_bytes) const {
  // By number, not position: the page's last job may have been deleted
  // since (retention) and ids only grow.
  const int64_t after = after_id.empty() ? 0 : JobNumber(after_id);
  Page page;
  size_t bytes = 0;
  for (const auto& id : order_) {
    const v1::Job& job = jobs_.at(id);
    if (JobNumber(id) <= after) continue;
    if (owner != nullptr && job.owner() != *owner) continue;
    if (!states.empty() &&
        std::find(states.begin(), states.end(), job.state()) == states.end()) {
      continue;
    }
    const size_t size = max_bytes == SIZE_MAX ? 0 : job.ByteSizeLong();
    if (page.jobs.size() >= max_jobs ||
        (!page.jobs.empty() && bytes + size > max_bytes)) {
      page.more = true;
      break;
    }
    bytes += size;
    page.jobs.push_back(job);
  }
  return page;
}

absl::StatusOr<v1::Job> JobCore::Cancel(const std::string& job_id,
                                        const std::string& reason) {
  absl::StatusOr<v1::Job*> job = FindUnfinished(job_id);
  if (!job.ok()) return job.status();
  // During RESTARTING too: a cancel always wins over a pending restart.
  EndJob(**job, v1::JOB_STATE_CANCELLED,
         reason.empty() ? "cancelled by user" : reason, &effects_.messages);
  Save();
  return **job;
}

v1::Job* JobCore::Find(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : &it->second;
}

absl::StatusOr<v1::Job*> JobCore::FindUnfinished(const std::string& job_id) {
  v1::Job* job = Find(job_id);
  if (job == nullptr) {
    return absl::NotFoundError(absl::StrCat("no job with id '", job_id, "'"));
  }
  if (IsFinal(job->state())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, " already ended ", StateName(job->state())));
  }
  return job;
}

void JobCore::Transition(v1::Job& job, v1::JobState to,
                         const std::string& reason) {
  absl::Status allowed = CheckTransition(job.state(), to);
  if (!allowed.ok()) {
    Log(LogLevel::kError, absl::StrCat("job ", job.id(), ": ", allowed.message()));
    return;
  }
  const int64_t now = now_;
  // Fair share counts the slot time of RUNNING generations.
  if (job.state() == v1::JOB_STATE_RUNNING && to != v1::JOB_STATE_RUNNING) {
    ChargeJob(job, now);
    charged_until_ms_.erase(job.id());
  }
  if (to == v1::JOB_STATE_RUNNING) charged_until_ms_[job.id()] = now;
  v1::Transition t;
  t.set_from(job.state());
  t.set_to(to);
  t.set_time_unix_ms(now);
  t.set_reason(reason);
  if (to == v1::JOB_STATE_RUNNING) {  // what accounting charges the period with
    t.set_slots(job.world_size());
    int gpu = 0;
    for (const v1::RankInfo& rank : job.ranks()) gpu += rank.gpu() ? 1 : 0;
    t.set_gpu_slots(gpu);
  }
  *job.add_transitions() = t;
  job.set_state(to);
  job.set_reason(reason);
  if (to == v1::JOB_STATE_RUNNING) job.set_started_unix_ms(now);
  if (IsFinal(to)) {
    job.set_finished_unix_ms(now);
    job.clear_pending_reason();
  }
  Log(LogLevel::kInfo, absl::StrCat("job ", job.id(), ": ", StateName(t.from()),
                                    " -> ", StateName(to), " (", reason, ")"));
  MarkDirty(job.id());
  save_now_ = true;
  v1::JobEvent event;
  event.set_time_unix_ms(now);
  *event.mutable_transition() = std::move(t);
  RecordEvent(job.id(), std::move(event));
  if (IsFinal(to)) effects_.changes.push_back(EventsClosed{job.id()});
}

void JobCore::SchedulePass(Outbox* outbox) {
  ChargeUsage(now_);
  std::vector<PendingJob> fifo;
  for (const auto& id : queue_) fifo.push_back(PendingOf(jobs_.at(id)));
  // With nobody queued, a pass still decides the running jobs' spares.
  // (charged_until_ms_ holds the RUNNING jobs: no walk over finished ones.)
  const bool spares_wanted =
      std::any_of(charged_until_ms_.begin(), charged_until_ms_.end(),
                  [this](const auto& running) {
                    return SparesWanted(jobs_.at(running.first)) > 0;
                  });
  if (fifo.empty() && !spares_wanted) {
    pass_order_.clear();
    estimated_start_ms_.clear();
    wait_kinds_.clear();
    RecordSpares({});
    return;
  }
  ScheduleResult result = Schedule(SchedulingInputFor(std::move(fifo)));
  RecordPass(result);
  for (const Placement& placement : result.placements) {
    queue_.erase(std::find(queue_.begin(), queue_.end(), placement.job_id));
    StartJob(jobs_.at(placement.job_id), placement, outbox);
  }
  for (const Preemption& preemption : result.preemptions) {
    v1::Job& victim = jobs_.at(preemption.victim);
    Preempt(victim, preemption.reason, preemption.grace_ms, outbox);
    // In the queue view at once, last (the next pass places it).
    pass_order_.push_back(victim.id());
    victim.set_pending_reason(PendingOf(victim).not_ready);
  }
  RecordSpares(result.spares);  // after the starts: a started job's note
}

void JobCore::StartJob(v1::Job& job, const Placement& placement,
                       Outbox* outbox) {
  const std::vector<std::string>& workers = placement.rank_workers;
  // A preempted generation's ranks used its keys until they stopped.
  if (job.generation() > 0) {
    effects_.changes.push_back(GenerationsEnded{job.id(), job.generation()});
  }
  job.set_generation(job.generation() + 1);
  job.clear_ranks();
  job.clear_pending_reason();
  job.clear_progress();
  job.clear_stragglers();
  job.set_world_size(static_cast<int>(workers.size()));
  *job.mutable_resume_from() = ResumePoint(job);
  std::map<std::string, v1::CoordinatorMessage> per_worker;
  std::map<std::string, int> local_counts;
  for (const auto& w : workers) ++local_counts[w];
  std::map<std::string, int> local_next;
  for (size_t r = 0; r < workers.size(); ++r) {
    const std::string& name = workers[r];
    const auto* worker = registry_.Find(name);
    v1::RankInfo* info = job.add_ranks();
    info->set_rank(static_cast<int>(r));
    info->set_worker(name);
    info->set_host(worker->info.collective_host());
    info->set_state(v1::RANK_STATE_ASSIGNED);
    const bool gpu_slot =
        r < placement.on_gpu_slot.size() && placement.on_gpu_slot[r];
    info->set_gpu_slot(gpu_slot);
    info->set_gpu(placement.gpu);
    registry_.Occupy(name, {job.id(), job.generation(), static_cast<int>(r)},
                     gpu_slot);
    v1::RankAssignment* a = per_worker[name].mutable_assign()->add_ranks();
    a->set_job_id(job.id());
    a->set_generation(job.generation());
    a->set_rank(static_cast<int>(r));
    a->set_world_size(static_cast<int>(workers.size()));
    a->set_local_rank(local_next[name]++);
    a->set_local_world_size(local_counts[name]);
    a->set_gpu(placement.gpu);
    *a->mutable_resume() = job.resume_from();
  }
  std::string reason = absl::StrCat(DescribePlacement(workers), " (generation ",
                                    job.generation(), ")");
  if (!job.resume_from().path().empty()) {
    absl::StrAppend(&reason, ", resuming from the checkpoint of ",
                    job.resume_from().job_id(), " at step ",
                    job.resume_from().step());
  }
  Transition(job, v1::JOB_STATE_RUNNING, reason);
  effects_.changes.push_back(
      GenerationStarted{job.id(), job.generation(), job.world_size()});
  for (auto& [name, message] : per_worker) {
    *message.mutable_assign()->mutable_spec() = job.spec();  // once per worker
    outbox->push_back({registry_.Find(name)->link, name, std::move(message)});
  }
}

void JobCore::StopRanks(const v1::Job& job, const std::string& reason,
                        Outbox* outbox, int64_t checkpoint_grace_ms) {
  std::set<std::string> notified;
  for (const v1::RankInfo& rank : job.ranks()) {
    if (notified.count(rank.worker())) continue;
    const auto* worker = registry_.Find(rank.worker());
    if (worker == nullptr) continue;
    notified.insert(rank.worker());
    v1::CoordinatorMessage message;
    message.mutable_cancel()->set_job_id(job.id());
    message.mutable_cancel()->set_generation(job.generation());
    message.mutable_cancel()->set_reason(reason);
    if (checkpoint_grace_ms >= 0) {
      message.mutable_cancel()->set_checkpoint_first(true);
      message.mutable_cancel()->set_grace_ms(checkpoint_grace_ms);
    }
    outbox->push_back({worker->link, rank.worker(), std::move(message)});
  }
}

void JobCore::EndJob(v1::Job& job, v1::JobState to, const std::string& reason,
                     Outbox* outbox) {
  const v1::JobState from = job.state();
  Transition(job, to, reason);
  reattach_deadline_ms_.erase(job.id());
  if (from != v1::JOB_STATE_RUNNING) {
    queue_.erase(std::find(queue_.begin(), queue_.end(), job.id()));
  }
  // A restarting job's last generation may still be stopping.
  if (from != v1::JOB_STATE_QUEUED) StopRanks(job, reason, outbox);
  if (from != v1::JOB_STATE_RUNNING) SchedulePass(outbox);  // room behind it
  effects_.changes.push_back(JobRendezvousDropped{job.id()});
  trained_generation_.erase(job.id());
  in_place_generation_.erase(job.id());
  in_place_newcomers_.erase(job.id());
  log_limiter_.Forget(job.id());
  metric_limiter_.Forget(job.id());
}

absl::Status JobCore::CheckRankOwner(const std::string& worker,
                                     const std::string& job_id, int generation,
                                     int rank) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end() ||
      !registry_.Holds(worker, {job_id, generation, rank})) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", worker, " does not run rank ", rank, " of job ",
                     job_id, " generation ", generation));
  }
  if (rank < 0 || rank >= it->second.ranks_size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", rank, " out of range for job ", job_id));
  }
  return absl::OkStatus();
}

}  // namespace trainctl::coordinator
