// The agent's real surroundings: gRPC to the coordinator, rank processes,
// the system clock (AgentDeps, agent.h).

#include "worker/agent/agent.h"
#include "worker/agent/rank_process.h"

namespace trainctl::agent {

AgentDeps SystemAgentDeps(const AgentOptions& options) {
  static const RealClock clock;
  AgentDeps deps;
  deps.coordinator =
      GrpcCoordinatorConnection(options.coordinator, options.credentials);
  deps.start_rank = [](const RankCommand& command,
                       RankHandle::Callbacks callbacks)
      -> absl::StatusOr<std::unique_ptr<RankHandle>> {
    absl::StatusOr<std::unique_ptr<RankProcess>> process =
        RankProcess::Start(command, std::move(callbacks));
    if (!process.ok()) return process.status();
    return std::unique_ptr<RankHandle>(*std::move(process));
  };
  deps.clock = &clock;
  return deps;
}

}  // namespace trainctl::agent
