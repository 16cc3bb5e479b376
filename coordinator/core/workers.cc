// JobCore: workers joining, leaving and keeping their leases, and what a
// lost worker costs the jobs that had ranks on it.

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "coordinator/core/job_core.h"

namespace trainctl::coordinator {

std::vector<v1::WorkerInfo> JobCore::Workers() const {
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

const WorkerRegistry::Worker* JobCore::RoomiestWorker() const {
  const std::vector<WorkerSlots> workers = registry_.FreeSlots();
  if (workers.empty()) return nullptr;
  // Where a job would most likely start.
  const WorkerSlots* pick = &workers.front();
  for (const WorkerSlots& w : workers) {
    if (w.free_slots > pick->free_slots) pick = &w;
  }
  return registry_.Find(pick->name);
}

absl::Status JobCore::RegisterWorker(const v1::RegisterRequest& info,
                                     std::shared_ptr<AgentLink> link) {
  absl::Status status = registry_.Register(info, link, now_);
  if (!status.ok()) return status;
  v1::CoordinatorMessage hello;
  hello.mutable_registered()->set_worker_name(info.name());
  hello.mutable_registered()->set_heartbeat_interval_ms(heartbeat_interval_ms_);
  Outbox cancels;
  ReattachRanks(info, link, hello.mutable_registered(), &cancels);
  Outbox& outbox = effects_.messages;
  outbox.push_back({link, info.name(), std::move(hello)});
  outbox.insert(outbox.end(), cancels.begin(), cancels.end());
  SchedulePass(&outbox);
  Save();
  Log(LogLevel::kInfo, absl::StrCat("worker ", info.name(), " registered: ",
                                    info.slots(), " slots at ",
                                    info.collective_host()));
  return absl::OkStatus();
}

void JobCore::WorkerDisconnected(const std::string& worker,
                                 const AgentLink* link) {
  if (shutting_down_) return;  // the streams close because we stop
  LoseWorker(worker, link, "its stream closed", &effects_.messages);
  Save();
}

void JobCore::Heartbeat(const std::string& worker) {
  registry_.Heartbeat(worker, now_);
}

void JobCore::CheckLeases() {
  for (const std::string& name : registry_.Expired(now_)) {
    if (const auto* w = registry_.Find(name)) {
      effects_.disconnect.push_back(w->link);
    }
    LoseWorker(name, nullptr, "its lease expired (no heartbeat)",
               &effects_.messages);
  }
  CheckHangs(&effects_.messages);
  CheckReattach(&effects_.messages);
  Save();
  RetireFinished();
}

void JobCore::LoseWorker(const std::string& worker, const AgentLink* link,
                         const std::string& why, Outbox* outbox) {
  if (registry_.Find(worker) == nullptr) return;
  std::set<WorkerRegistry::RankKey> lost = registry_.Remove(worker, link);
  if (registry_.Find(worker) != nullptr) return;  // a newer link owns the name
  Log(LogLevel::kWarning, absl::StrCat("worker ", worker, " lost: ", why));
  // Every rank the worker held is marked first: in-place recovery goes on
  // with the others only.
  std::map<std::string, WorkerRegistry::RankKey> first_lost;
  for (const auto& key : lost) {
    v1::Job* job = Find(key.job_id);
    if (job == nullptr || job->generation() != key.generation) continue;
    if (key.rank >= 0 && key.rank < job->ranks_size() &&
        job->ranks(key.rank).state() != v1::RANK_STATE_EXITED) {
      v1::RankInfo* rank = job->mutable_ranks(key.rank);
      rank->set_state(v1::RANK_STATE_LOST);
      rank->set_message(absl::StrCat("worker ", worker, " was lost: ", why));
      MarkDirty(job->id());
    }
    first_lost.emplace(key.job_id, key);  // the set is ordered: lowest rank
  }
  for (const auto& [job_id, key] : first_lost) {
    v1::Job* job = Find(job_id);
    if (job->state() == v1::JOB_STATE_RESTARTING) {
      NameLossAfterPeerExit(*job, worker, key.rank, why);
      continue;
    }
    if (job->state() != v1::JOB_STATE_RUNNING) continue;
    std::string lost_rank = absl::StrCat("worker ", worker, " running rank ",
                                         key.rank, " was lost: ", why);
    if (!RecoverInPlace(*job, lost_rank, outbox)) {
      EndGeneration(*job, lost_rank, /*counted=*/true, outbox);
    }
  }
  SchedulePass(outbox);
}

namespace {

// What a rank's collective says when its peer died first (Gloo's TCP pair,
// NCCL's socket errors): its exit is a symptom of another's.
bool SaysItLostAPeer(const std::string& text) {
  for (const char* symptom :
       {"by peer", "Broken pipe", "remote process exited"}) {
    if (absl::StrContains(text, symptom)) return true;
  }
  return false;
}

}  // namespace

void JobCore::NameLossAfterPeerExit(v1::Job& job, const std::string& worker,
                                    int rank, const std::string& why) {
  // When a node dies, its peers' collectives fail at once (Gloo: "connection
  // reset by peer") and their exits can reach the coordinator a moment
  // before the dead node's stream closes.
  NameCauseOfEndedGeneration(
      job, rank,
      absl::StrCat("worker ", worker, " running rank ", rank, " was lost: ", why));
}

void JobCore::NameExitAfterPeerExit(v1::Job& job, int rank,
                                    const std::string& exit,
                                    const std::string& message) {
  // A rank that dies takes its peers' collectives with it; the peer whose
  // agent reports first ends the generation with "reset by peer".
  if (job.transitions_size() == 0 || SaysItLostAPeer(message)) return;
  const v1::Transition& ended = job.transitions(job.transitions_size() - 1);
  if (!SaysItLostAPeer(ended.reason())) return;
  NameCauseOfEndedGeneration(job, rank, exit);
}

void JobCore::NameCauseOfEndedGeneration(v1::Job& job, int rank,
                                         const std::string& cause) {
  // The generation ended on a symptom; the restart stays one, but the
  // reason should name the cause. Only right after that end: news minutes
  // later is news of its own.
  if (job.transitions_size() == 0) return;
  const v1::Transition& ended = job.transitions(job.transitions_size() - 1);
  if (ended.to() != v1::JOB_STATE_RESTARTING ||
      now_ - ended.time_unix_ms() > kPeerExitWindowMs ||
      !absl::StartsWith(ended.reason(), "rank ") ||
      !absl::StrContains(ended.reason(), " exited with code ")) {
    return;
  }
  job.set_reason(absl::StrCat(
      cause, " (the exit before it was most likely a symptom: ", ended.reason(),
      ")"));
  MarkDirty(job.id());
  RecordNote(
      job, rank,
      absl::StrCat("[trainctl] ", cause, ", ", now_ - ended.time_unix_ms(),
                   " ms after a peer's exit ended generation ",
                   job.generation(), ": that exit was most likely a symptom"));
}

}  // namespace trainctl::coordinator
