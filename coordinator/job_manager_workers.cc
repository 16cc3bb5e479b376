// JobManager: workers joining, leaving and keeping their leases, and what a
// lost worker costs the jobs that had ranks on it.

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "coordinator/job_manager.h"

namespace trainctl::coordinator {

std::vector<v1::WorkerInfo> JobManager::Workers() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<v1::WorkerInfo> workers = registry_.Describe();
  for (v1::WorkerInfo& w : workers) {
    for (const auto& [job, held] : held_spares_) {
      for (const std::string& name : held) {
        if (name == w.name()) w.add_spare_for(job);
      }
    }
  }
  return workers;
}

absl::Status JobManager::RegisterWorker(const v1::RegisterRequest& info,
                                        std::shared_ptr<AgentLink> link) {
  {
    Turn turn(*this);
    absl::Status status = registry_.Register(info, link);
    if (!status.ok()) return status;
    v1::CoordinatorMessage hello;
    hello.mutable_registered()->set_worker_name(info.name());
    hello.mutable_registered()->set_heartbeat_interval_ms(
        heartbeat_interval_ms_);
    Outbox cancels;
    ReattachRanksLocked(info, link, hello.mutable_registered(), &cancels);
    Outbox& outbox = *turn.outbox();
    outbox.push_back({link, std::move(hello)});
    outbox.insert(outbox.end(), cancels.begin(), cancels.end());
    ScheduleLocked(&outbox);
    turn.Save();
  }
  TLOG_INFO << "worker " << info.name() << " registered: " << info.slots()
            << " slots at " << info.collective_host();
  return absl::OkStatus();
}

void JobManager::WorkerDisconnected(const std::string& worker,
                                    const AgentLink* link) {
  Turn turn(*this);
  if (shutting_down_) return;  // the streams close because we stop
  LoseWorkerLocked(worker, link, "its stream closed", turn.outbox());
  turn.Save();
}

void JobManager::Heartbeat(const std::string& worker) {
  std::lock_guard<std::mutex> lock(mu_);
  registry_.Heartbeat(worker);
}

void JobManager::CheckLeases() {
  std::vector<std::shared_ptr<AgentLink>> expired_links;
  {
    Turn turn(*this);
    for (const std::string& name : registry_.Expired()) {
      if (const auto* w = registry_.Find(name)) expired_links.push_back(w->link);
      LoseWorkerLocked(name, nullptr, "its lease expired (no heartbeat)",
                       turn.outbox());
    }
    CheckHangsLocked(turn.outbox());
    CheckReattachLocked(turn.outbox());
    turn.Save();
    turn.Add(RetireFinishedLocked());
  }
  for (auto& link : expired_links) link->Disconnect();
}

void JobManager::LoseWorkerLocked(const std::string& worker,
                                  const AgentLink* link, const std::string& why,
                                  Outbox* outbox) {
  if (registry_.Find(worker) == nullptr) return;
  std::set<WorkerRegistry::RankKey> lost = registry_.Remove(worker, link);
  if (registry_.Find(worker) != nullptr) return;  // a newer link owns the name
  TLOG_WARNING << "worker " << worker << " lost: " << why;
  // Every rank the worker held is marked first: in-place recovery goes on
  // with the others only.
  std::map<std::string, WorkerRegistry::RankKey> first_lost;
  for (const auto& key : lost) {
    v1::Job* job = FindLocked(key.job_id);
    if (job == nullptr || job->generation() != key.generation) continue;
    if (key.rank >= 0 && key.rank < job->ranks_size() &&
        job->ranks(key.rank).state() != v1::RANK_STATE_EXITED) {
      v1::RankInfo* rank = job->mutable_ranks(key.rank);
      rank->set_state(v1::RANK_STATE_LOST);
      rank->set_message(absl::StrCat("worker ", worker, " was lost: ", why));
      MarkDirtyLocked(job->id());
    }
    first_lost.emplace(key.job_id, key);  // the set is ordered: lowest rank
  }
  for (const auto& [job_id, key] : first_lost) {
    v1::Job* job = FindLocked(job_id);
    if (job->state() == v1::JOB_STATE_RESTARTING) {
      NameLossAfterPeerExitLocked(*job, worker, key.rank, why);
      continue;
    }
    if (job->state() != v1::JOB_STATE_RUNNING) continue;
    std::string lost_rank =
        absl::StrCat("worker ", worker, " running rank ", key.rank, " was lost: ", why);
    if (!RecoverInPlaceLocked(*job, lost_rank, outbox)) {
      EndGenerationLocked(*job, lost_rank, /*counted=*/true, outbox);
    }
  }
  ScheduleLocked(outbox);
}

void JobManager::NameLossAfterPeerExitLocked(v1::Job& job, const std::string& worker,
                                             int rank, const std::string& why) {
  // When a node dies, its peers' collectives fail at once (Gloo: "connection
  // reset by peer") and their exits can reach the coordinator a moment
  // before the dead node's stream closes. The generation has then ended on
  // a symptom; the restart stays one, but the reason should name the cause.
  // Only right after that end: a loss minutes later is news of its own.
  if (job.transitions_size() == 0) return;
  const v1::Transition& ended = job.transitions(job.transitions_size() - 1);
  if (ended.to() != v1::JOB_STATE_RESTARTING ||
      clock_.NowUnixMs() - ended.time_unix_ms() > kPeerExitWindowMs ||
      !absl::StartsWith(ended.reason(), "rank ") ||
      !absl::StrContains(ended.reason(), " exited with code ")) {
    return;
  }
  const std::string loss =
      absl::StrCat("worker ", worker, " running rank ", rank, " was lost: ", why);
  job.set_reason(absl::StrCat(loss, " (the exit before it was most likely a symptom: ",
                              ended.reason(), ")"));
  MarkDirtyLocked(job.id());
  RecordNoteLocked(job, rank,
                   absl::StrCat("[trainctl] ", loss, ", ",
                                clock_.NowUnixMs() - ended.time_unix_ms(),
                                " ms after a peer's exit ended generation ",
                                job.generation(), ": that exit was most likely a symptom"));
}

}  // namespace trainctl::coordinator
