// JobCore's side of preemption: a running job gives up its slots to a job
// of a higher priority (or to one within its quota, when it borrowed them).
// Its ranks are asked to checkpoint and stop (the agent's SIGUSR1; every
// rank stops after the same step and rank 0 writes that step's checkpoint),
// and the agent terminates them when the class's grace period runs out. The
// job waits in the queue as PREEMPTED, its old ranks' slots counted as
// coming free, and its next generation resumes from its latest checkpoint
// like a restart that costs none of its max_restarts.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/rank_exit.h"
#include "coordinator/core/job_core.h"
#include "coordinator/job_state.h"

namespace trainctl::coordinator {
namespace {

std::string Seconds(int64_t ms) {
  return ms % 1000 == 0 ? absl::StrCat(ms / 1000, " s")
                        : absl::StrCat(ms / 1000.0, " s");
}

}  // namespace

void JobCore::Preempt(v1::Job& job, const std::string& why, int64_t grace_ms,
                      Outbox* outbox) {
  if (job.state() != v1::JOB_STATE_RUNNING) return;
  job.set_preemptions(job.preemptions() + 1);
  reattach_deadline_ms_.erase(job.id());
  job.clear_progress();
  const std::string reason = absl::StrCat(
      why, "; its ranks checkpoint and stop (grace ", Seconds(grace_ms),
      "), then it resumes from that checkpoint when slots allow");
  StopRanks(job, reason, outbox, grace_ms);
  Transition(job, v1::JOB_STATE_PREEMPTED, reason);
  Enqueue(job.id());
}

bool JobCore::OnStoppedRank(v1::Job& job, const std::string& worker,
                            const v1::RankStatus& status, Outbox* outbox) {
  if (status.generation() != job.generation()) return false;
  if (job.state() == v1::JOB_STATE_RUNNING &&
      status.exit_code() == kRankExitStopped) {
    // Someone signalled a rank by hand: its peers stop at the same step,
    // so the job is as good as preempted.
    Preempt(job,
            absl::StrCat("rank ", status.rank(), " on worker ", worker,
                         " checkpointed and stopped on a request to its "
                         "process (SIGUSR1), not from the scheduler"),
            scheduling_.GraceOf(job.spec().priority()), outbox);
    return true;
  }
  if (job.state() != v1::JOB_STATE_PREEMPTED) return false;
  // Ranks that were past their last step when asked finish normally.
  const bool all_finished = std::all_of(
      job.ranks().begin(), job.ranks().end(), [](const v1::RankInfo& r) {
        return r.state() == v1::RANK_STATE_EXITED && r.exit_code() == 0;
      });
  if (all_finished) {
    EndJob(job, v1::JOB_STATE_SUCCEEDED,
           absl::StrCat("all ", job.ranks_size(),
                        " ranks finished before the request to stop "
                        "reached them"),
           outbox);
  }
  return true;
}

void JobCore::ResumeStopping(const std::set<std::string>& jobs,
                             const std::string& worker,
                             const std::shared_ptr<AgentLink>& link,
                             Outbox* outbox) {
  for (const std::string& id : jobs) {
    const v1::Job& job = jobs_.at(id);
    v1::CoordinatorMessage m;
    v1::CancelRanks* cancel = m.mutable_cancel();
    cancel->set_job_id(id);
    cancel->set_generation(job.generation());
    cancel->set_reason(job.reason());
    cancel->set_checkpoint_first(true);
    cancel->set_grace_ms(scheduling_.GraceOf(job.spec().priority()));
    outbox->push_back({link, worker, std::move(m)});
  }
}

}  // namespace trainctl::coordinator
