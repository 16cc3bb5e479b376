// The agent's side of in-place recovery: a rank process outlives its
// generation, so what it reports is filed under whichever identity it
// holds now.

#include <utility>
#include <vector>

#include "common/log.h"
#include "worker/agent/agent.h"

namespace trainctl::agent {

RankHandle::Callbacks Agent::CallbacksFor(const RankId& id) {
  RankHandle::Callbacks callbacks;
  callbacks.on_line = [this, id](const std::string& stream, const std::string& text) {
    v1::AgentMessage m;
    auto* log = m.mutable_log();
    log->set_job_id(std::get<0>(id));
    log->set_generation(std::get<1>(id));
    log->mutable_line()->set_rank(std::get<2>(id));
    log->mutable_line()->set_stream(stream);
    log->mutable_line()->set_text(text);
    log->mutable_line()->set_time_unix_ms(clock_.NowUnixMs());
    Send(std::move(m));
  };
  callbacks.on_report = [this, id](const v1::RankReport& report) {
    OnRankReport(id, report);
  };
  callbacks.on_exit = [this, id](int code, const std::string& error) {
    OnRankExit(id, code, error);
  };
  return callbacks;
}

void Agent::Regroup(const v1::RegroupRanks& regroup) {
  std::vector<RankId> died_first;
  std::vector<RankId> reaped;  // no process left to reap under the new id
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const v1::RegroupRanks::Move& move : regroup.moves()) {
      const RankId from{regroup.job_id(), regroup.from_generation(), move.from_rank()};
      const RankId to{regroup.job_id(), regroup.generation(), move.rank()};
      auto it = ranks_.find(from);
      if (it == ranks_.end()) {
        // Gone and reaped before the news came: its old exit was refused,
        // so the coordinator hears of it under the new identity.
        died_first.push_back(to);
        reaped.push_back(to);
        continue;
      }
      std::unique_ptr<RankHandle> handle = std::move(it->second);
      ranks_.erase(it);
      if (!handle->Rebind(CallbacksFor(to))) {
        died_first.push_back(to);
        exits_heard_.erase(from);  // reaped under `to` once that exit is heard
      }
      if (regroup.at_step_boundary()) {
        handle->RequestRegroup(regroup.generation());
      } else {
        // Its collectives may never fail on their own: the lost peer may be
        // cut off rather than dead.
        handle->AbandonGroup(regroup.from_generation());
      }
      ranks_[to] = std::move(handle);
      progress_.erase(from);
      if (auto gpu = rank_gpus_.find(from); gpu != rank_gpus_.end()) {
        rank_gpus_[to] = std::move(gpu->second);
        rank_gpus_.erase(gpu);
      }
    }
  }
  TLOG_INFO << "job " << regroup.job_id()
            << (regroup.at_step_boundary() ? " regroups at its next step boundary"
                                           : " recovered in place")
            << ": generation " << regroup.generation() << " on " << regroup.world_size()
            << " ranks";
  for (const RankId& id : died_first) {
    OnRankExit(id, 1, "the rank process exited before it could join the recovered generation");
  }
  for (const RankId& id : reaped) ForgetUnstarted(id);
}

}  // namespace trainctl::agent
